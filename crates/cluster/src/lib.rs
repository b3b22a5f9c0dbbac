pub mod jetstream;
