//! Where read-through's loads put what they found: the record goes into the store as the
//! server's own write (`Author::SERVER`, so the write-behind tap does not write it back), only
//! if the key is still absent and no client wrote it while the row was being read: a write
//! made during a load always wins over the loaded, older row.

use std::sync::Arc;
use std::time::Duration;

use store::{Kind, Store};
use writeback::Loaded;

pub struct StoreSink(pub Arc<Store>);

impl writeback::Sink for StoreSink {
    fn store(
        &self,
        key: &[u8],
        record: &Loaded,
        ttl: Option<Duration>,
        unchanged: &mut dyn FnMut() -> bool,
    ) {
        let expire_at = ttl.map(|t| store::now_ms() + t.as_millis() as u64);
        let (kind, value) = match record {
            Loaded::String(v) => (Kind::String, v.clone()),
            Loaded::Hash(cols) => {
                let mut out = Vec::new();
                let entries = cols.iter().map(|(f, v)| (f.as_bytes(), v.as_bytes(), None));
                store::hash::encode(entries, &mut out);
                (Kind::Hash, out)
            }
        };
        // Under the key's lock, so that no write of the key comes between the check and the
        // put (a write's change tap runs under the same lock).
        self.0.write(store::Author::SERVER, key, |e| {
            if !e.exists() && unchanged() {
                if let Err(e) = e.put(kind, &value, expire_at, 0) {
                    // Out of memory: the read answers as a miss; nothing is lost (the row
                    // is still the database's).
                    tracing::debug!("read-through: not stored: {e:?}");
                }
            }
        });
    }
}
