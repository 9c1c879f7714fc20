//! The periodic table's rows, by name, for operators.

use sea_orm::{ConnectionTrait, DbErr};

use super::{read_record, record_columns};
use crate::record::PeriodicRecord;
use crate::sql::dialect::quote;
use crate::sql::store::Store;
use crate::table::PeriodicColumn;

impl Store {
    /// Every row of the periodic table, by name (one per periodic job ever configured: a
    /// bounded set).
    pub(crate) async fn periodic_rows<C: ConnectionTrait>(
        &self,
        conn: &C,
    ) -> Result<Vec<PeriodicRecord>, DbErr> {
        let mut sql = self.sql();
        sql.push(&format!("SELECT {} FROM ", record_columns(self.backend)))
            .table(self.outbox.periodic_table())
            .push(&format!(
                " ORDER BY {}",
                quote(self.backend, PeriodicColumn::Name.as_str())
            ));
        conn.query_all_raw(sql.build())
            .await?
            .iter()
            .map(read_record)
            .collect()
    }
}
