//! Generates the consumer's types from the committed export, as a consumer team's build
//! script would.

fn main() {
    let config = outbox_codegen::CodegenConfig::builder()
        .kernel_path("outbox_core")
        .derive("PartialEq")
        .build();
    if let Err(error) =
        outbox_codegen::build_script::generate_into_out_dir("schemas", "consumer.rs", &config)
    {
        panic!("generating the consumer's types failed: {error}");
    }
}
