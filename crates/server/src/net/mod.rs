//! Network runtime (stub).
