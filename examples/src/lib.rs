//! Runnable programs that show the family's primitives at work.
//!
//! Each program is one scenario under `src/bin/`, run with
//! `cargo run --release -p sync-examples --bin NAME`, and prints what it
//! shows. This library is empty on purpose.
//!
//! | program | shows |
//! |---|---|
//! | `bounded_buffer` | `ast-mutex`: putters enter while not full, getters while not empty; each exit wakes only a thread that can use the new state |
//! | `watermark_buffer` | `ast-mutex`: marginal putters that only put below half full, an overlapping condition condition variables cannot express |
//! | `relay_race` | `ast-mutex`: a state machine where each exit names the one runner that may go next |
//! | `ast_async_buffer` | `ast-mutex`: tokio tasks put with `enter_arc_async`, threads get with `enter`, in one buffer; timed-out waits lose nothing |
//! | `mutex_tasks` | `lockfree-sync`: sixty tasks hold three mutexes across `.await`s without blocking the executor, beside a thread using the same locks |
//! | `semaphore_pool` | `lockfree-sync`: a semaphore limits a connection pool to four; a waiter cancelled by a timeout loses no permit |
