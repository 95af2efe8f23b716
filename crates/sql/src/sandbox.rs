//! The SQL sandbox: SQLite's authorizer decides, action by action while a statement is
//! compiled, what user SQL may do. No SQL text is ever inspected.
//!
//! The same callback records which tables a statement touches (for expiry and operation
//! counting) and whether it writes or changes the schema.

use crate::conn::Analysis;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

/// Prefix of the engine's own tables and triggers: readable, never writable by users.
pub(crate) const RESERVED: &str = "_cairn_";

/// PRAGMAs user SQL may run: read-only schema introspection.
const PRAGMAS: &[&str] = &[
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "foreign_key_check",
    "foreign_keys",
];

/// Virtual-table modules that only ever hold data in the database itself.
const MODULES: &[&str] = &["fts3", "fts4", "fts5", "rtree", "rtree_i32"];

/// Per-connection authorizer state, shared between the callback and the engine thread.
#[derive(Debug, Default)]
pub(crate) struct AuthState {
    /// Engine-issued SQL: everything is allowed and nothing recorded.
    pub internal: bool,
    /// The statement is being stepped, not compiled: an ATTACH seen now is VACUUM's own.
    pub running: bool,
    /// Why the last denial happened, in words for the client.
    pub refusal: Option<String>,
    /// What the statement being compiled touches.
    pub seen: Analysis,
    /// Tables this statement drops: their `_cairn_*` triggers go with them.
    dropping: Vec<String>,
    /// The last action asked about was a DROP: SQLite's DROP TABLE / VIEW asks next for a
    /// DELETE of the object, which must be allowed (IGNORE would skip the drop).
    after_drop: bool,
}

impl AuthState {
    /// Forgets what the previous statement touched, before compiling the next.
    pub fn reset(&mut self) {
        self.refusal = None;
        self.seen = Analysis::default();
        self.running = false;
        self.dropping.clear();
        self.after_drop = false;
    }
}

fn reserved(name: &str) -> bool {
    strip_prefix_ci(name, RESERVED).is_some()
}

fn system(name: &str) -> bool {
    strip_prefix_ci(name, "sqlite_").is_some()
}

fn touch(st: &mut AuthState, table: &str) {
    if table.is_empty() || reserved(table) || system(table) {
        return;
    }
    let t = table.to_ascii_lowercase();
    if !st.seen.tables.contains(&t) {
        st.seen.tables.push(t);
    }
}

pub(crate) fn authorize(st: &mut AuthState, ctx: AuthContext<'_>) -> Authorization {
    if st.internal {
        return Authorization::Allow;
    }
    let after_drop = std::mem::replace(
        &mut st.after_drop,
        matches!(
            ctx.action,
            AuthAction::DropTable { .. }
                | AuthAction::DropView { .. }
                | AuthAction::DropTempTable { .. }
                | AuthAction::DropTempView { .. }
        ),
    );
    match decide(st, &ctx) {
        // SQLite's truncate optimisation (a DELETE without WHERE dropping all rows at once)
        // would bypass the update hook that tells write-behind which rows went (`crate::rows`);
        // IGNORE for a DELETE statement's check turns it off, and the rows go one by one.
        Ok(())
            if !after_drop
                && matches!(ctx.action, AuthAction::Delete { table_name } if !system(table_name)) =>
        {
            Authorization::Ignore
        }
        Ok(()) => Authorization::Allow,
        Err(why) => {
            st.refusal.get_or_insert(why);
            Authorization::Deny
        }
    }
}

const NO_TEMP: &str =
    "TEMP objects are not allowed (each command may run on a different pooled connection)";

fn decide(st: &mut AuthState, ctx: &AuthContext<'_>) -> Result<(), String> {
    // Writes to the engine's tables are allowed only from the engine's own triggers.
    let from_engine = ctx.accessor.is_some_and(reserved);
    let top_level = ctx.accessor.is_none();
    // `CREATE TABLE temp.t` is no TEMP action to SQLite, only a plain one in the temp schema:
    // judge by the schema name too, or such a table would shadow a main one of the same name
    // on one pooled connection (issue 11, item 5). Reading the temp schema is harmless, and
    // so is the UPDATE of its (empty) catalog that ALTER TABLE RENAME makes. Inserting into
    // that catalog is creating something there (`CREATE TRIGGER temp.t … ON main_table` is
    // announced as a plain trigger of the main schema).
    let upkeep = match ctx.action {
        AuthAction::Read { .. } => true,
        AuthAction::Update { table_name, .. } => system(table_name),
        _ => false,
    };
    if !upkeep
        && ctx
            .database_name
            .is_some_and(|d| d.eq_ignore_ascii_case("temp"))
    {
        return Err(NO_TEMP.into());
    }
    match ctx.action {
        AuthAction::Select | AuthAction::Recursive | AuthAction::Transaction { .. } => Ok(()),
        AuthAction::Savepoint { .. } | AuthAction::Reindex { .. } => Ok(()),
        AuthAction::Read { table_name, .. } => {
            // `pragma_<name>` table-valued functions run their PRAGMA later, while stepping,
            // where it cannot be told from a module's own; so judge them here, at compile time.
            if let Some(p) = strip_prefix_ci(table_name, "pragma_") {
                pragma(p, None)?;
            }
            touch(st, table_name);
            Ok(())
        }
        AuthAction::Insert { table_name }
        | AuthAction::Delete { table_name }
        | AuthAction::Update { table_name, .. } => {
            if reserved(table_name) && !from_engine {
                return Err(format!(
                    "{table_name} holds cairn's row metadata and is read-only"
                ));
            }
            // DDL shows up as writes to sqlite_schema; those are not rows the user changed.
            st.seen.dml |= top_level && !system(table_name);
            touch(st, table_name);
            Ok(())
        }
        AuthAction::Function { function_name } => {
            let f = function_name.to_ascii_lowercase();
            match f.as_str() {
                "load_extension" => Err("load_extension is not allowed".into()),
                "fts3_tokenizer" => Err("fts3_tokenizer is not allowed".into()),
                _ => Ok(()),
            }
        }
        // Virtual-table modules compile their own SQL while the user's statement runs (FTS5
        // reads `PRAGMA data_version`); a read-only PRAGMA then is theirs, not the user's.
        AuthAction::Pragma {
            pragma_value: None, ..
        } if st.running => Ok(()),
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => pragma(pragma_name, pragma_value),
        AuthAction::Attach { .. } if st.running => Err("VACUUM is not allowed".into()),
        AuthAction::Attach { .. } => Err("ATTACH is not allowed".into()),
        AuthAction::Detach { .. } => Err("DETACH is not allowed".into()),
        AuthAction::CreateTempTable { .. }
        | AuthAction::CreateTempIndex { .. }
        | AuthAction::CreateTempTrigger { .. }
        | AuthAction::CreateTempView { .. }
        | AuthAction::DropTempTable { .. }
        | AuthAction::DropTempIndex { .. }
        | AuthAction::DropTempTrigger { .. }
        | AuthAction::DropTempView { .. } => Err(NO_TEMP.into()),
        // Indexes and triggers of cairn's tables are cairn's: a user one could change or
        // block its row bookkeeping.
        AuthAction::CreateIndex { table_name, .. }
        | AuthAction::CreateTrigger { table_name, .. }
            if reserved(table_name) =>
        {
            Err(format!(
                "{table_name} belongs to cairn: indexes and triggers on it are not allowed"
            ))
        }
        AuthAction::CreateTable { table_name: n }
        | AuthAction::CreateView { view_name: n }
        | AuthAction::CreateIndex { index_name: n, .. }
        | AuthAction::CreateTrigger {
            trigger_name: n, ..
        } => {
            name_ok(n)?;
            st.seen.ddl = true;
            Ok(())
        }
        AuthAction::CreateVtable {
            table_name,
            module_name,
        } => {
            name_ok(table_name)?;
            if !MODULES.iter().any(|m| m.eq_ignore_ascii_case(module_name)) {
                return Err(format!(
                    "virtual table module {module_name} is not allowed (allowed: {})",
                    MODULES.join(", ")
                ));
            }
            st.seen.ddl = true;
            Ok(())
        }
        AuthAction::DropTrigger {
            trigger_name,
            table_name,
        } if reserved(trigger_name) => {
            // SQLite asks for each trigger of a table being dropped; only then may ours go.
            if st
                .dropping
                .iter()
                .any(|t| t.eq_ignore_ascii_case(table_name))
            {
                Ok(())
            } else {
                Err(format!(
                    "{trigger_name} belongs to cairn and cannot be changed"
                ))
            }
        }
        AuthAction::DropTable { table_name } if !reserved(table_name) => {
            st.dropping.push(table_name.to_string());
            st.seen.ddl = true;
            Ok(())
        }
        AuthAction::DropTable { table_name: n }
        | AuthAction::DropView { view_name: n }
        | AuthAction::DropIndex { index_name: n, .. }
        | AuthAction::DropTrigger {
            trigger_name: n, ..
        }
        | AuthAction::DropVtable { table_name: n, .. } => {
            if reserved(n) {
                return Err(format!("{n} belongs to cairn and cannot be changed"));
            }
            st.seen.ddl = true;
            Ok(())
        }
        AuthAction::AlterTable { table_name: n, .. } => {
            if reserved(n) {
                return Err(format!("{n} belongs to cairn and cannot be changed"));
            }
            // The new name of a RENAME is not shown to the authorizer: the engine checks the
            // schema after the statement instead (`exec::renames`).
            st.seen.ddl = true;
            st.seen.alter = true;
            Ok(())
        }
        AuthAction::Analyze { .. } => {
            st.seen.ddl = true;
            Ok(())
        }
        // ATTACH/DETACH whose file or schema name is not a literal reach us as raw codes.
        AuthAction::Unknown { code: 24, .. } => Err("ATTACH is not allowed".into()),
        AuthAction::Unknown { code: 25, .. } => Err("DETACH is not allowed".into()),
        _ => Err(format!("operation {:?} is not allowed", ctx.action)),
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn name_ok(name: &str) -> Result<(), String> {
    if reserved(name) {
        return Err(format!(
            "names starting with {RESERVED} are reserved ({name})"
        ));
    }
    if strip_prefix_ci(name, "pragma_").is_some() {
        return Err(format!(
            "names starting with pragma_ are reserved for SQLite ({name})"
        ));
    }
    Ok(())
}

fn pragma(name: &str, value: Option<&str>) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    if !PRAGMAS.contains(&lower.as_str()) {
        return Err(format!(
            "PRAGMA {name} is not allowed (allowed: {})",
            PRAGMAS.join(", ")
        ));
    }
    if lower == "foreign_keys" && value.is_some() {
        return Err("PRAGMA foreign_keys can only be read".into());
    }
    Ok(())
}
