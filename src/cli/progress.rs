//! A progress line on stderr for work that takes more than a second: shown only when stderr is
//! a terminal and `-q` is not given, updated four times a second, cleared when the work ends.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Shown after this long.
const DELAY: Duration = Duration::from_secs(1);

/// A running progress line; dropping it clears the line.
pub struct Progress {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts `what` (e.g. `reading 2 report(s)`); silent when `quiet` or not on a terminal.
    pub fn start(what: String, quiet: bool) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        let thread = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let done = Arc::clone(&done);
            std::thread::spawn(move || tick(&what, &done))
        });
        Progress { done, thread }
    }
}

fn tick(what: &str, done: &AtomicBool) {
    let started = Instant::now();
    let mut shown = false;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        if started.elapsed() >= DELAY && !done.load(Ordering::Relaxed) {
            eprint!(
                "\rnsys-lens: {what}… {:.1} s",
                started.elapsed().as_secs_f64()
            );
            let _ = std::io::stderr().flush();
            shown = true;
        }
    }
    if shown {
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
