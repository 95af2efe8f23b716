//! The protocols a listener speaks; a leaf that the client registry, the front ends and the
//! runtime all name.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp,
    Memcache,
}
