//! The README's example screen ("Adding a screen"), compiled and tested in test builds only.

use crate::tui::app::{Action, App, Outcome};
use crate::tui::keys::{Binding, Context, DOWN, Key, bind};
use crate::tui::screens::{Opener, View};

const OWN: Context = Context::Own("Clock");

/// The screen's keys (the hint bar and `?` read them; q/Esc and ? are global).
#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    bind(OWN, DOWN, "later", Action::Move(1), Some((1, "later"))),
];

/// How the course map opens it: `c`, listed in `?`.
pub const OPENER: Opener = Opener::new(&[Key::Char('c')], "a clock", None, |_, _| {
    Ok(ClockState::default().into())
});

#[derive(Default)]
pub struct ClockState {
    pub offset: i32,
}

impl View for ClockState {
    fn update(&mut self, _app: &mut App, action: Action) -> Outcome {
        match action {
            Action::Move(d) => self.offset += d,
            Action::Back => return Outcome::Pop,
            _ => {}
        }
        Outcome::Stay
    }
    fn render(&self, app: &App, frame: &mut ratatui::Frame, area: ratatui::layout::Rect) {
        let line = ratatui::text::Line::styled(format!("+{} h", self.offset), app.theme.title);
        frame.render_widget(ratatui::widgets::Paragraph::new(line), area);
    }
    fn contexts(&self) -> Vec<Context> {
        vec![OWN]
    }
}
