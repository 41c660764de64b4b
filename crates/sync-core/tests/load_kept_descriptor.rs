//! The load sampler keeps `/proc/loadavg` open. A program may close
//! descriptors it does not own (a daemon closing every descriptor past
//! stderr) and get the number back for a file of its own: the sampler then
//! still reads the count, and leaves that file as it was. Descriptors are
//! process-wide, so this file is a test binary of its own with one test.
#![cfg(all(not(loom), target_os = "linux"))]

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use sync_core::testing::runnable_threads;

/// The descriptors of this process open on `path`.
fn descriptors_on(path: &Path) -> Vec<RawFd> {
    fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd is readable")
        .filter_map(|e| {
            let e = e.ok()?;
            if fs::read_link(e.path()).ok()? != path {
                return None;
            }
            e.file_name().to_str()?.parse().ok()
        })
        .collect()
}

#[test]
fn a_closed_and_reused_kept_descriptor_neither_stops_the_sampler_nor_moves_the_file() {
    let loadavg = Path::new("/proc/loadavg");
    assert!(runnable_threads().is_some_and(|n| n >= 1));
    let kept = descriptors_on(loadavg);
    assert_eq!(kept.len(), 1, "the sampler keeps one descriptor: {kept:?}");
    let fd = kept[0];
    // Closed behind the sampler's back.
    // SAFETY: the descriptor is open (listed above) and nothing in this
    // test binary uses it while it is closed, but the sampler, which
    // expects this.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    assert!(descriptors_on(loadavg).is_empty());
    assert!(
        runnable_threads().is_some_and(|n| n >= 1),
        "a closed kept descriptor stopped the sampler"
    );

    // The number reused for a file of the program's own, whose fourth word
    // reads as a count, and which the program is reading from its middle.
    let path = std::env::temp_dir().join(format!("load-kept-{}", std::process::id()));
    let text = b"not a load 987654/988000 average\n";
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("a temporary file");
    // The lowest free number is taken, and this binary opens nothing else
    // meanwhile.
    assert_eq!(file.as_raw_fd(), fd, "the file got the kept number back");
    file.write_all(text).expect("written");
    file.seek(SeekFrom::Start(4)).expect("sought");
    let n = runnable_threads().expect("the sampler still reads the count");
    assert!(
        (1..987_654).contains(&n),
        "the program's file read as a count: {n}"
    );
    // The file's offset did not move, and its text is whole.
    let mut rest = String::new();
    file.read_to_string(&mut rest).expect("read");
    assert_eq!(rest.as_bytes(), &text[4..]);
    drop(file);
    fs::remove_file(&path).expect("removed");
}
