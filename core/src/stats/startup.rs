//! The phases of a process's start, timed on request: `kiln embed --timings` and `kiln generate
//! --timings` turn this on and print [`report`] after the first result. Every layer marks its
//! own phases with [`span`] (the Vulkan instance, the adapters, the device and its probes, the
//! pipeline-cache file, each pipeline, the tokenizer, the weights, uploads, readbacks); while
//! recording is off a span costs one relaxed load, so the marks stay in the code for good.
//!
//! Wall-clock time on the host, one line per phase name: a phase that ran several times (a
//! pipeline, an upload) is one line with its count and the sum of its durations. Times are from
//! the process's start where the OS tells it (Linux: /proc, to its 10 ms clock tick), else from
//! the moment recording was turned on.

use crate::platform::Instant;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

static ON: AtomicBool = AtomicBool::new(false);
/// When recording was turned on, and how long the process had run by then (None: unknown).
static EPOCH: Mutex<Option<(Instant, Option<Duration>)>> = Mutex::new(None);
static SPANS: Mutex<Vec<Record>> = Mutex::new(Vec::new());
static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

thread_local! {
    /// A small number per thread (0: the one that turned recording on, normally main).
    static THREAD: u32 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

struct Record {
    name: &'static str,
    /// From the epoch.
    start: Duration,
    took: Duration,
    thread: u32,
}

/// Turns recording on for the rest of the process (call it first thing in `main`: phases that
/// ended before are not seen).
pub fn enable() {
    let mut e = EPOCH.lock().unwrap_or_else(|p| p.into_inner());
    if e.is_none() {
        // This thread (main's) is thread 0 of the report, whichever records first.
        THREAD.with(|_| {});
        *e = Some((Instant::now(), since_process_start()));
    }
    ON.store(true, Ordering::Release);
}

/// Whether phases are being recorded.
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A phase running until the returned guard is dropped.
#[must_use = "the phase ends when this guard is dropped"]
pub struct Span {
    name: &'static str,
    start: Option<Instant>,
}

/// Starts timing phase `name` (nothing is recorded while recording is off).
#[inline]
pub fn span(name: &'static str) -> Span {
    Span { name, start: enabled().then(Instant::now) }
}

/// `f()`, timed as phase `name`.
#[inline]
pub fn time<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let _s = span(name);
    f()
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(start) = self.start {
            record(self.name, start, Instant::now());
        }
    }
}

fn record(name: &'static str, start: Instant, end: Instant) {
    let Some((epoch, _)) = *EPOCH.lock().unwrap_or_else(|p| p.into_inner()) else { return };
    let thread = THREAD.with(|t| *t);
    let rec = Record { name, start: start.saturating_duration_since(epoch), took: end - start, thread };
    SPANS.lock().unwrap_or_else(|p| p.into_inner()).push(rec);
}

/// How long the process ran before this call, where the OS says (Linux: the process's start
/// time in clock ticks since boot, against the time since boot; both to 10 ms).
fn since_process_start() -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The fields after the command name (which may hold spaces) start after its last ')';
        // starttime is field 22 of the line, the 20th after the name.
        let rest = stat.get(stat.rfind(')')? + 1..)?;
        let start_ticks: f64 = rest.split_whitespace().nth(19)?.parse().ok()?;
        let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
        let up: f64 = uptime.split_whitespace().next()?.parse().ok()?;
        // USER_HZ is 100 on every Linux ABI Rust targets.
        Some(Duration::from_secs_f64((up - start_ticks / 100.0).max(0.0)))
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// One line per phase, in the order they began, each phase's inner phases indented under it
/// (a phase run in several places, such as a pipeline built while loading and while computing,
/// has a line under each); times in milliseconds from the process's start; then the time to now.
pub fn report() -> String {
    let Some((epoch, before)) = *EPOCH.lock().unwrap_or_else(|p| p.into_inner()) else {
        return "timings: recording was not turned on\n".into();
    };
    let now = epoch.elapsed();
    let spans = SPANS.lock().unwrap_or_else(|p| p.into_inner());
    let base = before.unwrap_or_default();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // Each span's path of names (outermost first), from a sweep per thread in the order of
    // starts (the longer first at equal starts) with a stack of the spans still open.
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].thread, spans[i].start, std::cmp::Reverse(spans[i].took)));
    let mut paths: Vec<Vec<&'static str>> = vec![Vec::new(); spans.len()];
    let mut open: Vec<usize> = Vec::new();
    for &i in &order {
        let r = &spans[i];
        while let Some(&top) = open.last() {
            let t = &spans[top];
            if t.thread == r.thread && r.start + r.took <= t.start + t.took {
                break;
            }
            open.pop();
        }
        let mut path = open.last().map_or_else(Vec::new, |&top| paths[top].clone());
        // A phase inside a run of itself (a retry) counts as that phase.
        if path.last() != Some(&r.name) {
            path.push(r.name);
        }
        paths[i] = path;
        open.push(i);
    }
    // One line per (thread, path): first start, count and summed time.
    struct Line {
        thread: u32,
        path: Vec<&'static str>,
        first: Duration,
        took: Duration,
        n: usize,
    }
    let mut lines: Vec<Line> = Vec::new();
    for &i in &order {
        let r = &spans[i];
        match lines.iter_mut().find(|l| l.thread == r.thread && l.path == paths[i]) {
            Some(l) => {
                l.took += r.took;
                l.n += 1;
            }
            None => lines.push(Line { thread: r.thread, path: paths[i].clone(), first: r.start, took: r.took, n: 1 }),
        }
    }
    // Depth first: each line after its parent, siblings by their first start.
    // A line's place: (first start, thread, name) of each phase on its path, outermost first.
    type Place = Vec<(Duration, u32, &'static str)>;
    let key = |l: &Line| -> Place {
        (1..=l.path.len())
            .map(|d| {
                let prefix = &l.path[..d];
                let first = lines.iter().filter(|o| o.thread == l.thread && o.path == prefix).map(|o| o.first).min();
                (first.unwrap_or(l.first), l.thread, prefix[d - 1])
            })
            .collect()
    };
    let mut keyed: Vec<(Place, &Line)> = lines.iter().map(|l| (key(l), l)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = String::from(
        "timings (wall ms from the process's start; n > 1: a phase run n times, ms their sum; \
         a phase inside another is indented under it)\n",
    );
    out.push_str(&format!("{:>9} {:>9} {:>5}  phase\n", "start", "ms", "n"));
    match before {
        Some(b) => out.push_str(&format!(
            "{:>9.1} {:>9.1} {:>5}  process start -> main (/proc, 10 ms ticks)\n",
            0.0,
            ms(b),
            ""
        )),
        None => out.push_str("        (times from main: the process's start is not known here)\n"),
    }
    for (_, l) in keyed {
        let thread = if l.thread == 0 { String::new() } else { format!("  [thread {}]", l.thread) };
        let n = if l.n > 1 { l.n.to_string() } else { String::new() };
        out.push_str(&format!(
            "{:>9.1} {:>9.1} {:>5}  {}{}{thread}\n",
            ms(base + l.first),
            ms(l.took),
            n,
            "  ".repeat(l.path.len() - 1),
            l.path[l.path.len() - 1]
        ));
    }
    out.push_str(&format!("{:>9.1} {:>9} {:>5}  (this report)\n", ms(base + now), "", ""));
    out
}

/// Forgets what was recorded (tests).
#[doc(hidden)]
pub fn clear() {
    SPANS.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_repeated_phases_read_as_such() {
        enable();
        clear();
        {
            let _outer = span("test outer");
            for _ in 0..3 {
                let _inner = span("test inner");
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        std::thread::spawn(|| time("test other thread", || std::thread::sleep(Duration::from_millis(1))))
            .join()
            .unwrap();
        let r = report();
        let line = |name: &str| r.lines().find(|l| l.ends_with(name) || l.contains(&format!("{name}  ["))).unwrap();
        let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let outer = cols(line("test outer"));
        let inner = line("test inner");
        // The inner phase ran three times, at least 6 ms in all, indented under the outer one.
        assert_eq!(cols(inner)[2], "3", "{r}");
        assert!(cols(inner)[1].parse::<f64>().unwrap() >= 6.0, "{r}");
        assert!(outer[1].parse::<f64>().unwrap() >= cols(inner)[1].parse::<f64>().unwrap(), "{r}");
        // The phase column starts after start, ms and n (9 + 1 + 9 + 1 + 5 + 2 characters).
        assert!(inner[27..].starts_with("  test inner") && line("test outer")[27..].starts_with("test outer"), "{r}");
        assert!(line("test other thread").contains("[thread"), "{r}");
        #[cfg(target_os = "linux")]
        assert!(r.contains("process start -> main"), "{r}");
    }
}
