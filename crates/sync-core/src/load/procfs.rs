//! The sampler's reading of the kernel's count of runnable threads, from
//! `/proc/loadavg` (see the parent module).

/// The runnable threads, from `/proc/loadavg`'s fourth field
/// (`running/total`, the same count as `procs_running` in `/proc/stat`), if
/// readable. Read into a stack buffer: the sampler allocates nothing, so it
/// never shows in a count of live bytes taken by another thread.
///
/// The file is opened once per process and kept open: each sample is then
/// one `pread` at offset 0, which has the kernel generate the text anew. An
/// open, a read and a close cost the sampling thread several times as
/// much, and that thread is a waiter on its way to park (see
/// [`tick`](super::tick)). A kept descriptor that stops reading as the
/// file (a program that closed descriptors it does not own, and perhaps
/// reused the number) falls back to opening the file for this sample. A
/// reused descriptor is not disturbed: `pread` moves no offset, and fails
/// on pipes, sockets and event descriptors. If the first open fails (no
/// descriptor free), every sample opens the file, as before.
pub(crate) fn procs_running() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use std::fs::File;
        use std::os::unix::fs::FileExt;
        use std::sync::OnceLock;
        static KEPT: OnceLock<Option<File>> = OnceLock::new();
        let kept = KEPT.get_or_init(|| File::open(LOADAVG).ok()).as_ref();
        kept.and_then(|f| running_field(|buf, at| f.read_at(buf, at)))
            .or_else(|| {
                let f = File::open(LOADAVG).ok()?;
                running_field(|buf, at| f.read_at(buf, at))
            })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Where [`procs_running`] reads the count.
#[cfg(target_os = "linux")]
const LOADAVG: &str = "/proc/loadavg";

/// `/proc/loadavg`'s running count, from the text `read_at(buf, offset)`
/// reads (at most 128 bytes, up to the end of its first read that ends a
/// line: the file is one line, which one read returns, so no second read
/// looks for its end): `None` if it fails, or if the text does not have
/// the file's shape.
#[cfg(target_os = "linux")]
fn running_field(read_at: impl Fn(&mut [u8], u64) -> std::io::Result<usize>) -> Option<u64> {
    let mut buf = [0u8; 128];
    let mut len = 0;
    while len < buf.len() {
        match read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if buf[len - 1] == b'\n' {
                    break;
                }
            }
            Err(_) => return None,
        }
    }
    let text = core::str::from_utf8(&buf[..len]).ok()?;
    // The file's whole shape (`0.52 0.58 0.59 3/517 28127`), so that a
    // descriptor reused for another file is not read as a count.
    let mut fields = text.split_ascii_whitespace();
    let averages = fields.by_ref().take(3).filter(|a| a.parse::<f64>().is_ok());
    if averages.count() != 3 {
        return None;
    }
    let (running, total) = fields.next()?.split_once('/')?;
    let last = fields.next()?;
    if fields.next().is_some() || total.parse::<u64>().is_err() || last.parse::<u64>().is_err() {
        return None;
    }
    running.parse().ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A reader of `text`, as `pread` reads a file.
    fn reads(text: &'static str) -> impl Fn(&mut [u8], u64) -> std::io::Result<usize> {
        move |buf, at| {
            let rest = text.as_bytes().get(at as usize..).unwrap_or_default();
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            Ok(n)
        }
    }

    #[test]
    fn the_running_count_is_the_fourth_fields_numerator() {
        assert_eq!(
            running_field(reads("0.52 0.58 0.59 3/517 28127\n")),
            Some(3)
        );
        // What a reused descriptor could read instead: not a count, even
        // where a fourth field starts with one.
        assert_eq!(running_field(reads("fn main() {}\n")), None);
        assert_eq!(running_field(reads("a b c 3/4 5\n")), None);
        assert_eq!(running_field(reads("1.0 2.0 3.0 3/4 5 6\n")), None);
        assert_eq!(running_field(reads("1.0 2.0 3.0 3 5\n")), None);
        assert_eq!(running_field(reads("")), None);
        assert_eq!(
            running_field(|_, _| Err(std::io::Error::from_raw_os_error(9))),
            None
        );
    }

    #[test]
    fn a_read_that_ends_the_line_is_the_last() {
        // One read returns the whole line; a second one, past it, fails.
        let line = reads("0.52 0.58 0.59 3/517 28127\n");
        let once = |buf: &mut [u8], at: u64| {
            assert_eq!(at, 0, "a second read after the line's end");
            line(buf, at)
        };
        assert_eq!(running_field(once), Some(3));
        // A line split over two reads is still read whole.
        let halves = |buf: &mut [u8], at: u64| {
            let n = buf.len().min(if at == 0 { 10 } else { 128 });
            reads("0.52 0.58 0.59 3/517 28127\n")(&mut buf[..n], at)
        };
        assert_eq!(running_field(halves), Some(3));
    }

    #[test]
    fn each_sample_reads_the_count_anew_through_the_kept_descriptor() {
        // The first sample opens the file and keeps it.
        assert!(procs_running().is_some_and(|n| n >= 1));
        let _busy = crate::testing::BusyThreads::start(8);
        std::thread::sleep(Duration::from_millis(20));
        // A text generated when the file was opened would not count them.
        let n = procs_running().expect("/proc/loadavg is readable");
        assert!(n >= 8, "8 busy threads, and {n} runnable");
    }
}
