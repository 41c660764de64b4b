//! Runnable programs that show the family's primitives at work.
//!
//! Each program is one scenario under `src/bin/`, run with
//! `cargo run --release -p sync-examples --bin NAME`, and prints what it
//! shows. The crates add theirs as they land (a bounded buffer and a
//! watermarked buffer on `ast-mutex`, tasks sharing a `lockfree-sync` mutex,
//! …); this library is empty on purpose.
