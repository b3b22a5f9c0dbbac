pub mod jetstream;
pub mod redis_state;
