//! The notes terminal (`ringlab present --notes`): follows the running presenter's slides and
//! shows what to say now and what comes next.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::tui::app::{Action, App, Outcome};
use crate::tui::keys::{Binding, Context, bind};
use crate::tui::notes::NotesMsg;
use crate::tui::screens::present::clock_text;

pub struct NotesState {
    pub msg: Option<NotesMsg>,
    /// The presenter has stopped (the notes wait for the next one).
    pub ended: bool,
    pub started: Instant,
    pub scroll: u16,
    /// Where the notes look for a presenter (shown while none is there).
    pub socket: Option<std::path::PathBuf>,
}

impl Default for NotesState {
    fn default() -> Self {
        Self {
            msg: None,
            ended: false,
            started: Instant::now(),
            scroll: 0,
            socket: None,
        }
    }
}

impl NotesState {
    /// Notes that wait for a presenter listening at `socket`.
    pub fn waiting_at(socket: &std::path::Path) -> Self {
        Self {
            socket: Some(socket.to_path_buf()),
            ..Self::default()
        }
    }

    pub fn receive(&mut self, msg: Option<NotesMsg>) {
        match msg {
            Some(m) => {
                if self.msg.as_ref().is_none_or(|o| o.slide != m.slide) {
                    self.scroll = 0;
                }
                self.msg = Some(m);
                // A presenter (again): follow it.
                self.ended = false;
            }
            None => self.ended = true,
        }
    }
}

pub fn update(s: &mut NotesState, _app: &mut App, action: Action) -> Outcome {
    match action {
        Action::Move(d) => s.scroll = s.scroll.saturating_add_signed(d as i16),
        Action::Back => return Outcome::Pop,
        _ => {}
    }
    Outcome::Stay
}

pub fn render(s: &NotesState, app: &App, frame: &mut Frame, area: Rect) {
    let t = &app.theme;
    let mut lines = Vec::new();
    let state = if s.ended {
        "the presenter has stopped; waiting for the next".to_string()
    } else {
        // The talk's clock: from the presenter's start, whenever this terminal opened.
        let secs = match s.msg.as_ref().and_then(|m| m.talk_started) {
            Some(t0) => u64::try_from(chrono::Utc::now().timestamp() - t0).unwrap_or(0),
            None => s.started.elapsed().as_secs(),
        };
        clock_text(secs)
    };
    match &s.msg {
        None => {
            lines.push(Line::styled(" Presenter notes", t.title));
            lines.push(Line::raw(""));
            lines.push(Line::styled(
                if s.ended {
                    " The presenter has stopped: these notes follow the next one that starts."
                        .to_string()
                } else {
                    match &s.socket {
                        Some(p) => format!(
                            " Waiting for a presenter: start `ringlab present` in another terminal (it listens at {}); these notes follow it.",
                            p.display()
                        ),
                        None => " Waiting for the presenter's first slide…".to_string(),
                    }
                },
                t.dim,
            ));
        }
        Some(m) => {
            lines.push(Line::from(vec![
                Span::styled(
                    format!(" Notes · {} · slide {}/{}", m.lesson, m.slide, m.total),
                    t.dim,
                ),
                Span::styled(format!("   {state}"), t.dim),
            ]));
            lines.push(Line::raw(""));
            lines.push(Line::from(vec![
                Span::styled(" NOW  ", t.accent),
                Span::styled(m.title.clone(), t.title),
            ]));
            lines.push(Line::raw(""));
            for l in m.notes.lines() {
                lines.push(Line::styled(format!(" {l}"), t.base));
            }
            if let Some(a) = &m.answer {
                lines.push(Line::raw(""));
                for (i, l) in a.lines().enumerate() {
                    let lead = if i == 0 { " ANSWER " } else { "        " };
                    lines.push(Line::from(vec![
                        Span::styled(lead, t.ok),
                        Span::styled(l.to_string(), t.strong),
                    ]));
                }
            }
            lines.push(Line::raw(""));
            lines.push(match &m.next {
                Some(n) => Line::from(vec![
                    Span::styled(" NEXT ", t.accent),
                    Span::styled(n.clone(), t.h2),
                ]),
                None => Line::styled(" NEXT  (last slide)", t.dim),
            });
        }
    }
    // Wrapped lines stay under their text's column (" The fix is…" keeps its space).
    let lines = crate::tui::markdown::keep_indent(lines, area.width as usize);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((s.scroll, 0)),
        area,
    );
}

const OWN: Context = Context::Own("Presenter notes");

/// This screen's keys (the `?` overlay lists them under its title).
#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, crate::tui::keys::DOWN, "scroll the notes", Action::Move(1), Some((1, "scroll"))),
    bind(OWN, crate::tui::keys::UP, "scroll up", Action::Move(-1), None),
];

impl crate::tui::screens::View for NotesState {
    fn update(&mut self, app: &mut App, action: Action) -> Outcome {
        update(self, app, action)
    }

    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        render(self, app, frame, area)
    }

    fn contexts(&self) -> Vec<crate::tui::keys::Context> {
        vec![OWN]
    }

    // The clock moves.
    fn tick(&self, _app: &App) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(1))
    }

    fn receive(&mut self, msg: &dyn std::any::Any, _app: &mut App) {
        if let Some(m) = msg.downcast_ref::<Option<NotesMsg>>() {
            NotesState::receive(self, m.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::{Terminal, backend::TestBackend};

    fn screen(s: &NotesState) -> String {
        let app = App::new(
            crate::course::Course::embedded(),
            crate::tui::theme::Theme::color(),
        );
        let mut term = Terminal::new(TestBackend::new(80, 12)).expect("terminal");
        term.draw(|f| render(s, &app, f, f.area())).expect("draw");
        let buf = term.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Notes opened late still count from the talk's start, and a quiz answer is shown.
    #[test]
    fn the_clock_counts_from_the_talk_and_the_answer_shows() {
        let mut s = NotesState::default();
        s.receive(Some(NotesMsg {
            lesson: "Ring all-reduce".into(),
            slide: 2,
            total: 20,
            title: "Class quiz · question 1 of 3".into(),
            notes: "How many bytes?".into(),
            next: None,
            talk_started: Some(chrono::Utc::now().timestamp() - 754),
            answer: Some("1006632960 B (960 MiB)\nEach rank sends…".into()),
        }));
        let text = screen(&s);
        // At least the 12:34 since the talk began (a loaded machine may draw a second or
        // more later: no upper bound).
        let shown = text
            .split(" in")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|mmss| mmss.split_once(':'))
            .and_then(|(m, s)| Some(m.parse::<u64>().ok()? * 60 + s.parse::<u64>().ok()?));
        assert!(shown.is_some_and(|x| x >= 754), "{shown:?}: {text}");
        assert!(text.contains("ANSWER 1006632960 B (960 MiB)"), "{text}");
        assert!(text.contains("        Each rank sends…"), "{text}");
    }
}
