//! Read means read: a lesson's lines earn credit by time on screen, at most a words-per-minute
//! floor's worth for what was shown, and a section counts as read once most of its words have
//! been credited. A search passing through, `G` or a fast page-down earn next to nothing.
//!
//! Pure: the reader passes the lines on screen and the seconds they were there.

use std::ops::Range;

/// The fastest a learner is taken to read (words per minute): a page of 250 words needs 25 s on
/// screen. `RINGLAB_READ_WPM` sets another floor ([`READ_WPM_ENV`]).
pub const DEFAULT_READ_WPM: f64 = 600.0;
/// The variable that sets the reading floor.
pub const READ_WPM_ENV: &str = "RINGLAB_READ_WPM";
/// Share of a section's words that must be credited for the section to count as read (a reader
/// may skip a few lines of a code block).
pub const SECTION_READ: f64 = 0.9;
/// Words per minute the course's estimates assume (a lesson's minutes, a track's).
pub const ESTIMATE_WPM: f64 = 200.0;

/// The reading floor from `RINGLAB_READ_WPM` (a number of words per minute, 1 to 1 000 000),
/// or the default; a bad value is an error naming the variable.
pub fn wpm_from_env() -> Result<f64, String> {
    match std::env::var(READ_WPM_ENV) {
        Err(_) => Ok(DEFAULT_READ_WPM),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|w| w.is_finite() && (1.0..=1_000_000.0).contains(w))
            .ok_or_else(|| {
                format!(
                    "{READ_WPM_ENV}={v:?} is not a reading speed: give words per minute, 1 to \
                     1000000 (default {DEFAULT_READ_WPM})"
                )
            }),
    }
}

/// Words in a line of text: runs of characters with a letter or digit in them.
pub fn words(text: &str) -> u32 {
    text.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count() as u32
}

/// Minutes to read `n` words at the course's estimate ([`ESTIMATE_WPM`]), at least 1.
pub fn minutes_for(n: u64) -> u32 {
    ((n as f64 / ESTIMATE_WPM).round() as u32).max(1)
}

/// The credit of each line of a laid-out lesson, and the section each line is in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Words per line.
    words: Vec<u32>,
    /// Section per line (0: before the first heading, k: under heading k − 1).
    section: Vec<usize>,
    /// Words credited per line (0..=words).
    credit: Vec<f64>,
    sections: usize,
}

impl Reading {
    /// A layout's lines (their words) and its headings' line numbers, in order; `shares` the
    /// share of each section already read (from progress), spread evenly over its lines.
    pub fn new(line_words: Vec<u32>, headings: &[usize], shares: &[f64]) -> Self {
        let sections = headings.len() + 1;
        let section: Vec<usize> = (0..line_words.len())
            .map(|i| headings.iter().take_while(|&&h| h <= i).count())
            .collect();
        let credit = line_words
            .iter()
            .zip(&section)
            .map(|(&w, &s)| f64::from(w) * shares.get(s).copied().unwrap_or(0.0).clamp(0.0, 1.0))
            .collect();
        Self {
            words: line_words,
            section,
            credit,
            sections,
        }
    }

    /// `seconds` with `lines` on screen, read at no more than `wpm`: that many words credited
    /// to the lines shown, in proportion to what each still lacks.
    pub fn credit(&mut self, lines: Range<usize>, seconds: f64, wpm: f64) {
        let lines = lines.start.min(self.words.len())..lines.end.min(self.words.len());
        let budget = seconds.max(0.0) * wpm / 60.0;
        let lacking: f64 = lines
            .clone()
            .map(|i| f64::from(self.words[i]) - self.credit[i])
            .sum();
        if lacking <= 0.0 || budget <= 0.0 {
            return;
        }
        let share = (budget / lacking).min(1.0);
        for i in lines {
            let w = f64::from(self.words[i]);
            self.credit[i] = (self.credit[i] + (w - self.credit[i]) * share).min(w);
        }
    }

    /// Words and words credited per section.
    fn totals(&self) -> Vec<(f64, f64)> {
        let mut t = vec![(0.0, 0.0); self.sections];
        for ((&w, &s), &c) in self.words.iter().zip(&self.section).zip(&self.credit) {
            t[s].0 += f64::from(w);
            t[s].1 += c;
        }
        t
    }

    /// Share of each section's words read (a section with no words is read).
    pub fn shares(&self) -> Vec<f64> {
        self.totals()
            .into_iter()
            .map(|(w, c)| if w > 0.0 { (c / w).min(1.0) } else { 1.0 })
            .collect()
    }

    /// Sections read, of all sections with words.
    pub fn sections_read(&self) -> (usize, usize) {
        let t = self.totals();
        let with_words = t.iter().filter(|(w, _)| *w > 0.0).count();
        let read = t
            .iter()
            .filter(|(w, c)| *w > 0.0 && *c >= SECTION_READ * w)
            .count();
        (read, with_words)
    }

    /// How much of the lesson is read, 0..=1: each section counts by its words, full once
    /// [`SECTION_READ`] of them are credited. Below 1 until every section is read, and then
    /// under [`super::progress::DONE_FRACTION`], so one unread section keeps the lesson "started".
    pub fn fraction(&self) -> f64 {
        let t = self.totals();
        let all: f64 = t.iter().map(|(w, _)| w).sum();
        if all <= 0.0 {
            return 1.0;
        }
        let got: f64 = t
            .iter()
            .map(|(w, c)| w * (c / (SECTION_READ * w)).min(1.0))
            .filter(|x| x.is_finite())
            .sum();
        let (read, of) = self.sections_read();
        let f = (got / all).clamp(0.0, 1.0);
        if read < of {
            f.min(super::progress::DONE_FRACTION - 0.01)
        } else {
            1.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sections of 100 words each on 10-word lines; headings at lines 0 and 10.
    fn lesson() -> Reading {
        Reading::new(vec![10; 20], &[0, 10], &[])
    }

    #[test]
    fn a_glance_earns_what_a_floor_reader_reads_in_that_time() {
        let mut r = lesson();
        // 1 s at 600 wpm: 10 words, spread over the 10 lines shown.
        r.credit(0..10, 1.0, 600.0);
        let s = r.shares();
        assert!((s[1] - 0.1).abs() < 1e-9, "{s:?}");
        assert_eq!(s[2], 0.0);
        assert_eq!(r.sections_read(), (0, 2));
        assert!(r.fraction() < 0.1);
    }

    #[test]
    fn every_section_on_screen_long_enough_is_read() {
        let mut r = lesson();
        r.credit(0..10, 10.0, 600.0);
        assert_eq!(r.sections_read(), (1, 2));
        assert!(r.fraction() < super::super::progress::DONE_FRACTION);
        r.credit(10..20, 9.0, 600.0);
        assert_eq!(r.sections_read(), (2, 2), "90 % of a section is enough");
        assert_eq!(r.fraction(), 1.0);
    }

    #[test]
    fn jumping_to_the_end_reads_nothing_above_it() {
        let mut r = lesson();
        // G: the last screen for a long time; the first section is never shown.
        r.credit(10..20, 3600.0, 600.0);
        assert_eq!(r.shares()[1], 0.0);
        assert_eq!(r.shares()[2], 1.0);
        assert!(r.fraction() < 0.6);
    }

    #[test]
    fn shares_from_progress_come_back() {
        let r = Reading::new(vec![10; 20], &[0, 10], &[1.0, 1.0, 0.5]);
        let s = r.shares();
        assert_eq!(s, vec![1.0, 1.0, 0.5]);
    }

    #[test]
    fn words_count_tokens_with_letters_or_digits() {
        assert_eq!(words("  │ ring all-reduce: 2·(N−1)/N ─── "), 3);
        assert_eq!(words("─────"), 0);
        assert_eq!(minutes_for(4000), 20);
        assert_eq!(minutes_for(10), 1);
    }
}
