//! Registry of connected clients (stub, being written).
pub struct ClientInfo;
pub struct ClientRegistry;
