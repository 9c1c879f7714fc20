//! [`Sql`]: a statement under construction, text and bound values, with the backend's
//! placeholders. Every hand-written statement of the crate is built with it.

use sea_orm::sea_query::Value;
use sea_orm::{DbBackend, Statement};

use super::dialect::{pg_bigint_array, quote_table};
use crate::table::TableName;

/// A statement under construction: text plus bound values, with the backend's placeholders.
#[derive(Debug)]
pub(crate) struct Sql {
    backend: DbBackend,
    text: String,
    values: Vec<Value>,
}

impl Sql {
    pub(crate) fn new(backend: DbBackend) -> Self {
        Self {
            backend,
            text: String::with_capacity(256),
            values: Vec::new(),
        }
    }

    /// Appends SQL text.
    pub(crate) fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a quoted, possibly schema-qualified table name.
    pub(crate) fn table(&mut self, name: &TableName) -> &mut Self {
        let quoted = quote_table(self.backend, name);
        self.text.push_str(&quoted);
        self
    }

    /// Appends a placeholder bound to `value`.
    pub(crate) fn bind(&mut self, value: Value) -> &mut Self {
        self.values.push(value);
        match self.backend {
            DbBackend::Postgres => {
                let n = self.values.len();
                self.text.push('$');
                self.text.push_str(&n.to_string());
            }
            _ => self.text.push('?'),
        }
        self
    }

    /// Appends a comma-separated list of integers (safe to inline: they are numbers).
    pub(crate) fn int_list<T: std::fmt::Display>(&mut self, items: &[T]) -> &mut Self {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.text.push_str(&item.to_string());
        }
        self
    }

    /// Appends the inside of `IN (…)` for `seqs` so that the statement text stays the same
    /// from batch to batch and the driver's prepared-statement cache keeps serving it (an
    /// inlined list is a new statement to parse and plan for every batch): on PostgreSQL
    /// one array parameter, elsewhere placeholders padded to the next power of two by
    /// repeating the last value.
    pub(crate) fn seq_list(&mut self, seqs: &[i64]) -> &mut Self {
        if self.backend == DbBackend::Postgres {
            // One parameter whatever the count: `IN (SELECT unnest(CAST($1 AS bigint[])))`.
            self.text.push_str("SELECT unnest(CAST(");
            self.bind(Value::String(Some(pg_bigint_array(seqs))));
            self.text.push_str(" AS bigint[]))");
            return self;
        }
        let Some(&last) = seqs.last() else {
            self.text.push_str("NULL");
            return self;
        };
        let padded = seqs.len().next_power_of_two();
        for i in 0..padded {
            if i > 0 {
                self.text.push_str(", ");
            }
            let seq = seqs.get(i).copied().unwrap_or(last);
            self.bind(Value::BigInt(Some(seq)));
        }
        self
    }

    /// Appends `<column> = ANY(CAST($n AS bigint[]))` on PostgreSQL (one array parameter:
    /// an index scan with the array as its condition, no join against an `unnest`), `<column>
    /// IN (…)` elsewhere (see [`seq_list`](Self::seq_list)).
    pub(crate) fn seq_in(&mut self, column: &str, seqs: &[i64]) -> &mut Self {
        if self.backend == DbBackend::Postgres {
            self.text.push_str(column);
            self.text.push_str(" = ANY(CAST(");
            self.bind(Value::String(Some(pg_bigint_array(seqs))));
            self.text.push_str(" AS bigint[]))");
            return self;
        }
        self.text.push_str(column);
        self.text.push_str(" IN (");
        self.seq_list(seqs);
        self.text.push(')');
        self
    }

    /// Appends a comma-separated list of placeholders bound to strings.
    pub(crate) fn string_list<S: AsRef<str>>(&mut self, items: &[S]) -> &mut Self {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.bind(Value::String(Some(item.as_ref().to_owned())));
        }
        self
    }

    pub(crate) fn build(self) -> Statement {
        Statement::from_sql_and_values(self.backend, self.text, self.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::text;

    #[test]
    fn placeholders_and_quoting() {
        let mut sql = Sql::new(DbBackend::Postgres);
        sql.push("SELECT \"seq\"")
            .push(" FROM ")
            .table(&TableName::new("app.outbox").unwrap())
            .push(" WHERE a = ")
            .bind(text("x"))
            .push(" AND b IN (")
            .string_list(&["y", "z"])
            .push(") AND c IN (")
            .int_list(&[1, 2])
            .push(")");
        let statement = sql.build();
        assert_eq!(
            statement.sql,
            r#"SELECT "seq" FROM "app"."outbox" WHERE a = $1 AND b IN ($2, $3) AND c IN (1, 2)"#
        );
        let mut sql = Sql::new(DbBackend::MySql);
        sql.push("`seq` = ").bind(text("x"));
        assert_eq!(sql.build().sql, "`seq` = ?");
        let mut sql = Sql::new(DbBackend::Sqlite);
        sql.push("IN (").seq_list(&[7, 8, 9]).push(")");
        let statement = sql.build();
        assert_eq!(statement.sql, "IN (?, ?, ?, ?)");
        assert_eq!(statement.values.unwrap().0.len(), 4);
        let mut sql = Sql::new(DbBackend::Postgres);
        sql.push("IN (").seq_list(&[7, 8, 9]).push(")");
        let statement = sql.build();
        assert_eq!(statement.sql, "IN (SELECT unnest(CAST($1 AS bigint[])))");
        assert_eq!(
            statement.values.unwrap().0,
            vec![Value::String(Some("{7,8,9}".to_owned()))]
        );
        let mut sql = Sql::new(DbBackend::Postgres);
        sql.seq_in("\"seq\"", &[7, 8]);
        let statement = sql.build();
        assert_eq!(statement.sql, r#""seq" = ANY(CAST($1 AS bigint[]))"#);
        assert_eq!(
            statement.values.unwrap().0,
            vec![Value::String(Some("{7,8}".to_owned()))]
        );
        let mut sql = Sql::new(DbBackend::MySql);
        sql.seq_in("`seq`", &[7, 8, 9]);
        assert_eq!(sql.build().sql, "`seq` IN (?, ?, ?, ?)");
    }
}
