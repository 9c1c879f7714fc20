use outbox_kernel::DomainEvent;

#[derive(DomainEvent)]
#[domain_event(crate = outbox_kernel, crate = outbox_kernel)]
pub enum A {
    #[domain_event(local)]
    Noted,
}

// Across two attributes, too.
#[derive(DomainEvent)]
#[domain_event(crate = outbox_kernel)]
#[domain_event(crate = "outbox_kernel")]
pub enum B {
    #[domain_event(local)]
    Noted,
}

#[derive(DomainEvent)]
#[domain_event(crate = 5)]
pub enum C {
    #[domain_event(local)]
    Noted,
}

#[derive(DomainEvent)]
#[domain_event(crate = "outbox core")]
pub enum D {
    #[domain_event(local)]
    Noted,
}

#[derive(DomainEvent)]
#[domain_event(crate)]
pub enum E {
    #[domain_event(local)]
    Noted,
}

// Only `crate` goes on the enum.
#[derive(DomainEvent)]
#[domain_event(crate = outbox_kernel, local)]
pub enum F {
    #[domain_event(local)]
    Noted,
}

fn main() {}
