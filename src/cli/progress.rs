//! A progress line on stderr for work that takes more than a second: shown only when stderr is
//! a terminal and `-q` is not given, updated four times a second, cleared when the work ends.
//! Reading reports shows a percentage and the time left (rows read against the rows the reports
//! hold); other work shows the time spent.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Shown after this long.
const DELAY: Duration = Duration::from_secs(1);

/// (done, total) so far, for a percentage, and what is counted (`rows`, `events`).
type Counter = (fn() -> (u64, u64), &'static str);

/// A running progress line; dropping it clears the line.
pub struct Progress {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts reading reports (`what`): the rows read so far against the rows they hold.
    pub fn reading(what: String, quiet: bool) -> Progress {
        nsys_lens::nsys::progress::reset();
        Progress::spawn(what, quiet, Some((nsys_lens::nsys::progress::rows, "rows")))
    }

    /// Starts writing (`what`): the events the conversion's passes have streamed so far against
    /// those they will stream (set by [`nsys_lens::export::stream::expect`]).
    pub fn writing(what: String, quiet: bool) -> Progress {
        let counter = (
            nsys_lens::export::stream::progress as fn() -> (u64, u64),
            "events",
        );
        Progress::spawn(what, quiet, Some(counter))
    }

    fn spawn(what: String, quiet: bool, counter: Option<Counter>) -> Progress {
        let done = Arc::new(AtomicBool::new(false));
        let thread = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let done = Arc::clone(&done);
            std::thread::spawn(move || tick(&what, &done, counter))
        });
        Progress { done, thread }
    }
}

fn tick(what: &str, done: &AtomicBool, counter: Option<Counter>) {
    let started = Instant::now();
    let mut shown = false;
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        if started.elapsed() >= DELAY && !done.load(Ordering::Relaxed) {
            let elapsed = started.elapsed().as_secs_f64();
            eprint!(
                "\r\x1b[2Knsys-lens: {what}… {}",
                status(elapsed, counter.map(|(count, unit)| (count(), unit)))
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

/// `45% (1.2 M of 2.6 M rows), 3 s left`, or the time spent when nothing is counted.
fn status(elapsed: f64, counted: Option<((u64, u64), &str)>) -> String {
    match counted {
        Some(((done, total), unit)) if total > 0 && done > 0 => {
            let share = (done as f64 / total as f64).min(0.99);
            let left = elapsed * (1.0 - share) / share;
            let m = |n: u64| n as f64 / 1e6;
            format!(
                "{:.0}% ({:.1} M of {:.1} M {unit}), {left:.0} s left",
                100.0 * share,
                m(done),
                m(total)
            )
        }
        _ => format!("{elapsed:.1} s"),
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

#[cfg(test)]
mod tests {
    use super::status;

    #[test]
    fn the_line_shows_a_share_and_the_time_left_when_rows_are_counted() {
        assert_eq!(
            status(2.0, Some(((1_000_000, 4_000_000), "rows"))),
            "25% (1.0 M of 4.0 M rows), 6 s left"
        );
        // More rows than expected (small tables beside the event tables): never past 99%.
        assert!(status(3.0, Some(((5, 4), "events"))).starts_with("99%"));
        assert_eq!(status(1.25, None), "1.2 s");
        assert_eq!(status(1.25, Some(((0, 10), "rows"))), "1.2 s");
    }
}
