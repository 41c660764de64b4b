//! A connection pool limited by a `lockfree_sync::Semaphore`: four permits
//! for four fake connections kept in a `Mutex<Vec<Conn>>`. Fifty tasks on a
//! 2-worker tokio runtime each wait for a permit with `acquire_async`,
//! check a connection out, "use" it (sleep a millisecond) and return it.
//! Meanwhile an impatient task gives up waiting with `tokio::time::timeout`,
//! which drops its queued `acquire_async` future: the cancelled request
//! takes no permit with it. At the end all four permits are free, every
//! connection is back, and no more than four were ever in use at once.
//!
//! `cargo run -p sync-examples --bin semaphore_pool`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lockfree_sync::{Mutex, Semaphore};

const CONNECTIONS: usize = 4;
const CLIENTS: usize = 50;

/// A fake connection.
#[derive(Debug)]
struct Conn {
    id: usize,
    uses: usize,
}

struct Pool {
    permits: Semaphore,
    idle: Mutex<Vec<Conn>>,
    in_use: AtomicUsize,
    max_in_use: AtomicUsize,
}

impl Pool {
    /// Waits for a connection, runs one query on it, puts it back.
    async fn query(&self) -> usize {
        let _permit = self
            .permits
            .acquire_async()
            .await
            .expect("the pool closes only after every client");
        let mut conn = self
            .idle
            .lock_async()
            .await
            .pop()
            .expect("a permit guarantees an idle connection");
        let now = self.in_use.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_use.fetch_max(now, Ordering::SeqCst);

        tokio::time::sleep(Duration::from_millis(1)).await;
        conn.uses += 1;

        self.in_use.fetch_sub(1, Ordering::SeqCst);
        let id = conn.id;
        self.idle.lock_async().await.push(conn);
        id
        // `_permit` drops here, after the connection is back.
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let pool = Arc::new(Pool {
        permits: Semaphore::new(CONNECTIONS),
        idle: Mutex::new((0..CONNECTIONS).map(|id| Conn { id, uses: 0 }).collect()),
        in_use: AtomicUsize::new(0),
        max_in_use: AtomicUsize::new(0),
    });
    let start = Instant::now();

    // Maintenance holds every permit while the clients line up.
    let maintenance = pool
        .permits
        .acquire_many_async(CONNECTIONS)
        .await
        .expect("the pool is open");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let pool = Arc::clone(&pool);
            tokio::spawn(async move { pool.query().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(2)).await;

    // The impatient client queues behind them and gives up: dropping its
    // `acquire_async` future withdraws it from the queue.
    let impatient = tokio::time::timeout(Duration::from_millis(5), pool.permits.acquire_async());
    assert!(
        impatient.await.is_err(),
        "nothing was free: it must time out"
    );
    drop(maintenance);

    let mut served = [0; CONNECTIONS];
    for c in clients {
        served[c.await.expect("a client panicked")] += 1;
    }
    let elapsed = start.elapsed();

    let max = pool.max_in_use.load(Ordering::SeqCst);
    let idle = pool.idle.lock();
    println!(
        "{CLIENTS} queries over {CONNECTIONS} connections in {elapsed:.1?}: per connection \
         {served:?}, at most {max} in use at once, {} permits free",
        pool.permits.available_permits()
    );
    assert_eq!(
        pool.permits.available_permits(),
        CONNECTIONS,
        "a permit was lost"
    );
    assert!(max <= CONNECTIONS, "{max} connections in use at once");
    assert_eq!(idle.len(), CONNECTIONS, "a connection was not returned");
    assert_eq!(idle.iter().map(|c| c.uses).sum::<usize>(), CLIENTS);
    assert_eq!(served.iter().sum::<usize>(), CLIENTS);
    drop(idle);

    // Shutting down: `close` sends every waiter away with an error (here, a
    // request for more connections than exist, which would otherwise wait
    // for ever), and later requests fail at once.
    let greedy = {
        let pool = Arc::clone(&pool);
        tokio::spawn(async move {
            pool.permits
                .acquire_many_async(CONNECTIONS + 1)
                .await
                .is_err()
        })
    };
    tokio::time::sleep(Duration::from_millis(1)).await;
    pool.permits.close();
    assert!(greedy.await.unwrap(), "close sends the waiter away");
    assert!(pool.permits.acquire_async().await.is_err());
    println!("closed: waiters and later requests get an error");
}
