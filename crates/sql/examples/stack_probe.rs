//! Measures how much thread stack SQLite needs for pathological statements (deep LIKE/GLOB
//! patterns, chained CTEs and views, nested subqueries and parentheses), by painting the
//! stack before the statement and finding the deepest overwritten word afterwards.
//! Run: `cargo run --release -p cairn-sql --example stack_probe -- KIND N`.

use rusqlite::Connection;

const STACK: usize = 256 << 20;
const PAINT: u64 = 0x5a5a_5a5a_5a5a_5a5a;

fn sql_for(kind: &str, n: usize) -> (Vec<String>, String, Vec<String>) {
    match kind {
        "like" => (
            vec![],
            "SELECT ? LIKE ?".into(),
            vec!["a".repeat(n), "%a".repeat(n) + "b"],
        ),
        "glob" => (
            vec![],
            "SELECT ? GLOB ?".into(),
            vec!["a".repeat(n), "*a".repeat(n) + "b"],
        ),
        "cte" => {
            let mut s = String::from("WITH c0 AS (SELECT 1 AS x)");
            for i in 1..n {
                s += &format!(", c{i} AS (SELECT x FROM c{})", i - 1);
            }
            s += &format!(" SELECT * FROM c{}", n - 1);
            (vec![], s, vec![])
        }
        "views" => {
            let mut setup = vec!["CREATE VIEW v0 AS SELECT 1 AS x".to_string()];
            for i in 1..n {
                setup.push(format!("CREATE VIEW v{i} AS SELECT x FROM v{}", i - 1));
            }
            (setup, format!("SELECT * FROM v{}", n - 1), vec![])
        }
        "vexpr" => {
            // Views whose result expressions nest 400 deep each: flattening stacks them up.
            let neg = |e: &str| format!("{}{e}{}", "-(".repeat(400), ")".repeat(400));
            let mut setup = vec!["CREATE VIEW v0 AS SELECT 1 AS x".to_string()];
            for i in 1..n {
                setup.push(format!(
                    "CREATE VIEW v{i} AS SELECT {} AS x FROM v{}",
                    neg("x"),
                    i - 1
                ));
            }
            (setup, format!("SELECT * FROM v{}", n - 1), vec![])
        }
        "subq" => (
            vec![],
            format!(
                "SELECT * FROM {}(SELECT 1){}",
                "(SELECT * FROM ".repeat(n),
                ")".repeat(n)
            ),
            vec![],
        ),
        "paren" => (
            vec![],
            format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
            vec![],
        ),
        "compound" => (vec![], vec!["SELECT 1"; n].join(" UNION ALL "), vec![]),
        "scalar" => (
            vec![],
            format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n)),
            vec![],
        ),
        _ => panic!("kind: like glob cte views subq paren compound scalar"),
    }
}

#[inline(never)]
fn paint(below: usize) -> usize {
    let here = &below as *const usize as usize;
    let top = here - 64 * 1024;
    let bottom = here - below;
    let mut p = bottom;
    while p < top {
        unsafe { std::ptr::write_volatile(p as *mut u64, PAINT) };
        p += 8;
    }
    bottom
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args[1].clone();
    let n: usize = args[2].parse().unwrap();
    let h = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            let db = Connection::open_in_memory().unwrap();
            let (setup, sql, params) = sql_for(&kind, n);
            for s in &setup {
                db.execute_batch(s).unwrap();
            }
            let base = &n as *const usize as usize;
            let bottom = paint(STACK - (1 << 20));
            let r = (|| -> rusqlite::Result<String> {
                let mut st = db.prepare(&sql)?;
                let mut rows = st.query(rusqlite::params_from_iter(params.iter()))?;
                let mut out = String::new();
                while let Some(row) = rows.next()? {
                    out = format!("{:?}", row.get_ref(0)?);
                }
                Ok(out)
            })();
            let mut p = bottom;
            while unsafe { std::ptr::read_volatile(p as *const u64) } == PAINT {
                p += 8;
            }
            let used = base - p;
            let msg = match r {
                Ok(s) => format!("ok {}", &s[..s.len().min(40)]),
                Err(e) => format!("err {e}"),
            };
            println!(
                "{kind} n={n}: stack {} KiB ({:.0} B/level): {msg}",
                used / 1024,
                used as f64 / n as f64
            );
        })
        .unwrap();
    h.join().unwrap();
}
