//! Stop strings over streamed text: text that might be the start of a stop string is held back
//! until it is known not to be, and generation ends before the first stop string.

#[derive(Debug, Default)]
pub struct StopStrings {
    stops: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopStrings {
    pub fn new(stops: &[String]) -> StopStrings {
        StopStrings { stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(), ..Default::default() }
    }

    /// Whether a stop string has appeared (nothing more comes out then).
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Adds `text` and returns what can go out now.
    pub fn push(&mut self, text: &str) -> String {
        if self.stopped {
            return String::new();
        }
        self.held.push_str(text);
        if let Some(at) = self.stops.iter().filter_map(|s| self.held.find(s.as_str())).min() {
            self.held.truncate(at);
            self.stopped = true;
            return std::mem::take(&mut self.held);
        }
        // Keep the longest suffix of held that is a proper prefix of a stop string.
        let mut keep = 0;
        for s in &self.stops {
            if let Some((i, _)) =
                self.held.char_indices().find(|&(i, _)| self.held.len() - i < s.len() && s.starts_with(&self.held[i..]))
            {
                keep = keep.max(self.held.len() - i);
            }
        }
        self.held.drain(..self.held.len() - keep).collect()
    }

    /// The end of the stream: whatever was held back goes out.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (Vec<String>, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut f = StopStrings::new(&stops);
        let mut out: Vec<String> = pieces.iter().map(|p| f.push(p)).collect();
        let stopped = f.stopped();
        out.push(f.finish());
        (out, stopped)
    }

    #[test]
    fn no_stops_passes_everything_through() {
        assert_eq!(run(&[], &["a", "b"]), (vec!["a".into(), "b".into(), "".into()], false));
        assert_eq!(run(&[""], &["a"]), (vec!["a".into(), "".into()], false));
    }

    #[test]
    fn stop_split_across_pieces_is_held_then_cut() {
        let (out, stopped) = run(&["<END>"], &["Hello <", "EN", "D> more"]);
        assert!(stopped);
        assert_eq!(out.concat(), "Hello ");
        assert_eq!(out[0], "Hello ");
        assert_eq!(out[1], "");
    }

    #[test]
    fn a_false_start_is_released() {
        let (out, stopped) = run(&["<END>"], &["a <E", "X b"]);
        assert!(!stopped);
        assert_eq!(out, vec!["a ".to_string(), "<EX b".into(), "".into()]);
        // Held text at the end of the stream comes out at finish.
        let (out, _) = run(&["<END>"], &["a <EN"]);
        assert_eq!(out, vec!["a ".to_string(), "<EN".into()]);
    }

    #[test]
    fn earliest_of_several_stops_wins_and_multibyte_text_is_safe() {
        let (out, stopped) = run(&["ß!", "\n\n"], &["über\n", "\nx ß!"]);
        assert!(stopped);
        assert_eq!(out.concat(), "über");
        let (out, stopped) = run(&["é"], &["caf", "é au lait"]);
        assert!(stopped);
        assert_eq!(out.concat(), "caf");
    }
}
