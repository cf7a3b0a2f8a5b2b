//! A class quiz (presenter mode): the question alone in large type, a countdown, then the
//! answer and its explanation on a key. Nothing is graded or recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::course::bank::Bank;
use crate::course::grade::letter;
use crate::course::quiz::{Answer, Instance};
use crate::tui::app::{Action, App, Outcome};
use crate::tui::keys::{Binding, Context, Key, bind};
use crate::tui::markdown::{self, RenderOptions};
use crate::tui::notes::{Hub, NotesMsg};
use crate::tui::screens::lesson::text_width;
use crossterm::event::KeyCode;

pub struct ClassQuizState {
    pub title: String,
    pub bank: Bank,
    /// Bank entries asked, in order.
    pub items: Vec<usize>,
    pub index: usize,
    pub instance: Result<Instance, String>,
    pub revealed: bool,
    pub countdown: Duration,
    pub deadline: Instant,
    /// Whole seconds left, as of the last tick.
    pub left: u64,
    /// The presenter's notes hub and the slide it showed: notes terminals get each question with
    /// its answer, and the slide back when the quiz closes.
    pub notes: Option<(Arc<Hub>, NotesMsg)>,
}

impl ClassQuizState {
    /// The items of lesson `lesson` (only `item` when given), each with `countdown_s` seconds.
    pub fn open(
        app: &App,
        lesson: &str,
        item: Option<&str>,
        countdown_s: u64,
    ) -> Result<Self, crate::tui::error::ScreenError> {
        let bank = Bank::from_course(&app.course);
        let Some(deck) = bank.deck_index(lesson) else {
            return Err(crate::tui::error::ScreenError::NoQuizDeck(
                lesson.to_string(),
            ));
        };
        let items: Vec<usize> = bank
            .in_deck(deck)
            .into_iter()
            .filter(|&i| bank.entries[i].inline_of.is_none())
            .filter(|&i| item.is_none_or(|id| bank.entries[i].item.id == id))
            .collect();
        if items.is_empty() {
            return Err(crate::tui::error::ScreenError::NoItems(
                bank.decks[deck].title.clone(),
            ));
        }
        let title = bank.decks[deck].title.clone();
        let countdown = Duration::from_secs(countdown_s.max(1));
        let mut s = Self {
            title,
            bank,
            items,
            index: 0,
            instance: Err(String::new()),
            revealed: false,
            countdown,
            deadline: Instant::now() + countdown,
            left: countdown.as_secs(),
            notes: None,
        };
        s.ask(0);
        Ok(s)
    }

    /// Tell notes terminals (where the presenter has them) about this quiz from now on.
    pub fn with_notes(mut self, hub: Option<Arc<Hub>>, slide: Option<NotesMsg>) -> Self {
        self.notes = hub.zip(slide);
        self.publish();
        self
    }

    /// What a notes terminal shows during the quiz: the question, its choices and the answer
    /// (the projector shows the answer only on a key).
    pub fn notes_msg(&self) -> Option<NotesMsg> {
        let (_, slide) = self.notes.as_ref()?;
        let mut notes = match &self.instance {
            Ok(i) => i.prompt.trim().to_string(),
            Err(e) => format!("This item cannot be shown: {e}"),
        };
        if let Some(&e) = self.items.get(self.index) {
            for (i, c) in self.bank.entries[e].item.choices.iter().enumerate() {
                notes.push_str(&format!("\n  {}) {c}", letter(i)));
            }
        }
        let mut answer = self.answer_text();
        if let Ok(i) = &self.instance
            && !i.explanation.trim().is_empty()
        {
            answer.push('\n');
            answer.push_str(i.explanation.trim());
        }
        Some(NotesMsg {
            title: format!(
                "Class quiz · question {} of {}",
                self.index + 1,
                self.items.len()
            ),
            notes,
            next: Some(if self.index + 1 < self.items.len() {
                "the next question".into()
            } else {
                format!("back to “{}”", slide.title)
            }),
            answer: Some(answer),
            ..slide.clone()
        })
    }

    fn publish(&self) {
        if let (Some((hub, _)), Some(msg)) = (&self.notes, self.notes_msg()) {
            hub.publish(&msg);
        }
    }

    /// The quiz closes: notes terminals go back to the slide.
    fn close(&self) {
        if let Some((hub, slide)) = &self.notes {
            hub.publish(slide);
        }
    }

    fn ask(&mut self, index: usize) {
        self.index = index.min(self.items.len().saturating_sub(1));
        let seed = crate::tui::screens::quiz::seed(chrono::Utc::now());
        self.instance = match self.items.get(self.index) {
            Some(&e) => self.bank.entries[e].item.instantiate(seed),
            None => Err("no item".into()),
        };
        self.revealed = false;
        self.deadline = Instant::now() + self.countdown;
        self.left = self.countdown.as_secs();
        self.publish();
    }

    /// True while the countdown runs (the app then ticks every second).
    pub fn counting(&self) -> bool {
        !self.revealed && self.left > 0
    }

    /// Recompute the seconds left from the deadline.
    pub fn tick(&mut self, now: Instant) {
        let d = self.deadline.saturating_duration_since(now);
        self.left = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    }

    fn answer_text(&self) -> String {
        let Some(&e) = self.items.get(self.index) else {
            return String::new();
        };
        let item = &self.bank.entries[e].item;
        let choice = |i: usize| {
            format!(
                "{}) {}",
                letter(i),
                item.choices.get(i).map_or("", String::as_str)
            )
        };
        match self.instance.as_ref().map(|i| &i.answer) {
            Ok(Answer::Choice(i)) => choice(*i),
            Ok(Answer::Choices(v)) | Ok(Answer::Order(v)) => {
                v.iter().map(|&i| choice(i)).collect::<Vec<_>>().join("   ")
            }
            // The graders' one format: large byte counts glossed, "1006632960 B (960 MiB)".
            Ok(Answer::Number(x)) => crate::course::grade::format_quantity(*x, item.unit),
            Ok(Answer::Computed(name)) => format!("computed by {name}"),
            Ok(Answer::Model(m)) => m.clone(),
            Err(e) => e.clone(),
        }
    }
}

pub fn update(s: &mut ClassQuizState, app: &mut App, action: Action) -> Outcome {
    match action {
        Action::Tick => s.tick(Instant::now()),
        // Space, Enter, → or PgDn: reveal, then the next question.
        Action::Open | Action::Page(1) => {
            if !s.revealed {
                s.revealed = true;
            } else if s.index + 1 < s.items.len() {
                s.ask(s.index + 1);
            } else {
                app.status = Some("that was the last question: q goes back to the slides".into());
            }
        }
        Action::Page(-1) => s.ask(s.index.saturating_sub(1)),
        Action::Back => {
            s.close();
            return Outcome::Pop;
        }
        _ => {}
    }
    Outcome::Stay
}

pub fn render(s: &ClassQuizState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let width = text_width(area.width);
    let x = area.x + area.width.saturating_sub(width) / 2;
    let opts = RenderOptions {
        width,
        theme: t,
        raw_tex: app.raw_tex,
        slides: true,
    };
    let mut lines: Vec<Line<'static>> = vec![
        Line::from(vec![
            Span::styled(format!("Class quiz · {}", s.title), t.dim),
            Span::styled(
                format!("   question {} of {}", s.index + 1, s.items.len()),
                t.dim,
            ),
        ]),
        Line::raw(""),
    ];
    let inst = match &s.instance {
        Ok(i) => i,
        Err(e) => {
            lines.push(Line::styled(
                format!("This item cannot be shown: {e}"),
                t.error,
            ));
            frame.render_widget(
                Paragraph::new(lines),
                Rect::new(x, area.y, width, area.height),
            );
            return;
        }
    };
    lines.extend(markdown::render(&inst.prompt, &opts).lines);
    if let Some(&e) = s.items.get(s.index) {
        let item = &s.bank.entries[e].item;
        if !item.choices.is_empty() {
            lines.push(Line::raw(""));
            for (i, c) in item.choices.iter().enumerate() {
                let mut l = vec![Span::styled(format!("  {}) ", letter(i)), t.key)];
                l.extend(markdown::inline_code(c, t.base, t.code));
                lines.push(Line::from(l));
            }
        }
    }
    lines.push(Line::raw(""));
    if s.revealed {
        lines.push(Line::from(vec![
            Span::styled("Answer: ", t.ok),
            Span::styled(s.answer_text(), t.strong),
        ]));
        if !inst.explanation.trim().is_empty() {
            lines.push(Line::raw(""));
            lines.extend(markdown::render(&inst.explanation, &opts).lines);
        }
    } else if s.left > 0 {
        lines.push(Line::styled(
            format!("⏱ {}:{:02}", s.left / 60, s.left % 60),
            t.warn,
        ));
        lines.push(Line::styled("Space or → shows the answer", t.dim));
    } else {
        lines.push(Line::styled(
            "⏱ Time is up. Space or → shows the answer",
            t.warn,
        ));
    }
    frame.render_widget(
        Paragraph::new(lines),
        Rect::new(x, area.y, width.min(area.width), area.height),
    );
}

const OWN: Context = Context::Own("Class quiz");

use Key::{Char, Code};

/// This screen's keys (the `?` overlay lists them under its title).
#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, &[Code(KeyCode::PageDown), Code(KeyCode::Right), Char(' '), Code(KeyCode::Enter), Char('l')], "show the answer, then the next question", Action::Page(1), Some((1, "answer / next"))),
    bind(OWN, &[Code(KeyCode::PageUp), Code(KeyCode::Left), Char('h')], "previous question", Action::Page(-1), Some((2, "previous"))),
];

impl crate::tui::screens::View for ClassQuizState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![OWN]
    }

    fn tick(&self, _app: &App) -> Option<std::time::Duration> {
        self.counting().then(|| std::time::Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The projector shows a byte answer as the graders write it: with its binary gloss.
    #[test]
    fn a_byte_answer_carries_its_binary_unit() {
        let app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let s = ClassQuizState::open(
            &app,
            "collectives",
            Some("collectives-reduce-scatter-bytes"),
            30,
        )
        .expect("the item");
        let text = s.answer_text();
        assert!(text.ends_with("B (") || text.contains(" B ("), "{text}");
        assert!(text.contains("iB)"), "{text}");
    }

    /// A notes terminal sees the question with its answer while the class sees only the
    /// question, and gets the slide back when the quiz closes.
    #[test]
    fn notes_show_the_answer_and_the_slide_comes_back() {
        use crate::tui::notes::{connect, follow};
        let app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("present.sock");
        let hub = Hub::start(&path).expect("hub");
        let slide = NotesMsg {
            lesson: "The collectives".into(),
            slide: 4,
            total: 9,
            title: "Reduce-scatter".into(),
            notes: "say this".into(),
            next: None,
            talk_started: Some(1_700_000_000),
            answer: None,
        };
        let mut s = ClassQuizState::open(
            &app,
            "collectives",
            Some("collectives-reduce-scatter-bytes"),
            30,
        )
        .expect("the item")
        .with_notes(Some(Arc::clone(&hub)), Some(slide.clone()));
        let asked = s.notes_msg().expect("a message");
        assert_eq!(asked.title, "Class quiz · question 1 of 1");
        assert_eq!(
            asked.talk_started, slide.talk_started,
            "the talk's clock is kept"
        );
        let answer = asked.answer.clone().expect("the answer");
        assert!(answer.starts_with(&s.answer_text()), "{answer}");
        assert!(!s.revealed, "the class has not seen it yet");
        let stream = connect(&path).expect("connect");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || follow(stream, |m| drop(tx.send(m))));
        let first = rx.recv_timeout(Duration::from_secs(5)).expect("first");
        assert_eq!(first, Some(asked));
        for _ in 0..100 {
            if hub.listeners() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut app = app;
        assert!(matches!(
            update(&mut s, &mut app, Action::Back),
            Outcome::Pop
        ));
        let back = rx.recv_timeout(Duration::from_secs(5)).expect("back");
        assert_eq!(back, Some(slide));
    }
}
