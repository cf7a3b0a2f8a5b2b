//! One-line text fields (the quiz answer, lesson search, a typed fix) with the keys a shell
//! user's fingers expect: Ctrl-A/E start and end, Ctrl-U clear to the start, Ctrl-W delete a
//! word, Ctrl-K delete to the end, Ctrl-Y paste back, ←/→ and Ctrl-←/→ move. The editing is
//! tui-input's; this wraps it for the app's actions and draws the cursor.

use crossterm::event::KeyEvent;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use tui_input::Input;

pub use tui_input::InputRequest;

/// The edit a key asks of a text field, if it is an editing key (Enter and Esc are not).
pub fn request(ev: &KeyEvent) -> Option<InputRequest> {
    tui_input::backend::crossterm::to_input_request(&crossterm::event::Event::Key(*ev))
}

#[derive(Debug, Clone, Default)]
pub struct Field {
    input: Input,
}

/// Two fields are equal when they show the same text with the cursor at the same place.
impl PartialEq for Field {
    fn eq(&self, other: &Self) -> bool {
        self.input.value() == other.input.value() && self.input.cursor() == other.input.cursor()
    }
}

impl Eq for Field {}

impl Field {
    pub fn value(&self) -> &str {
        self.input.value()
    }

    pub fn is_empty(&self) -> bool {
        self.input.value().is_empty()
    }

    pub fn apply(&mut self, req: InputRequest) {
        self.input.handle(req);
    }

    pub fn clear(&mut self) {
        self.input.reset();
    }

    /// Replace the text, cursor at the end.
    pub fn set(&mut self, text: &str) {
        self.input = Input::new(text.to_string());
    }

    /// The text with the cursor drawn at its place (reversed; a bar at the end).
    pub fn spans(&self, text: Style, cursor: Style) -> Vec<Span<'static>> {
        let value = self.input.value();
        let at = value
            .char_indices()
            .nth(self.input.cursor())
            .map_or(value.len(), |(i, _)| i);
        let (before, rest) = value.split_at(at);
        let mut chars = rest.chars();
        match chars.next() {
            None => vec![
                Span::styled(before.to_string(), text),
                Span::styled("▏", cursor),
            ],
            Some(c) => vec![
                Span::styled(before.to_string(), text),
                Span::styled(c.to_string(), text.add_modifier(Modifier::REVERSED)),
                Span::styled(chars.as_str().to_string(), text),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyCode, KeyModifiers};

    fn key(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    fn typed(f: &mut Field, s: &str) {
        for c in s.chars() {
            let r = request(&key(KeyCode::Char(c), KeyModifiers::NONE)).expect("a char");
            f.apply(r);
        }
    }

    fn ctrl(f: &mut Field, c: char) {
        let r = request(&key(KeyCode::Char(c), KeyModifiers::CONTROL)).expect("readline key");
        f.apply(r);
    }

    #[test]
    fn readline_keys_edit_instead_of_typing_letters() {
        let mut f = Field::default();
        typed(&mut f, "1.75 GB per rank");
        ctrl(&mut f, 'w');
        assert_eq!(f.value(), "1.75 GB per ");
        ctrl(&mut f, 'a');
        typed(&mut f, "~");
        assert_eq!(f.value(), "~1.75 GB per ");
        ctrl(&mut f, 'e');
        typed(&mut f, "x");
        assert_eq!(f.value(), "~1.75 GB per x");
        ctrl(&mut f, 'u');
        assert_eq!(f.value(), "");
        typed(&mut f, "2e9");
        f.apply(InputRequest::GoToPrevChar);
        f.apply(InputRequest::DeletePrevChar);
        assert_eq!(f.value(), "29");
        // The cursor is drawn on the character it stands on.
        let s = f.spans(Style::default(), Style::default());
        let text: Vec<&str> = s.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, ["2", "9", ""]);
    }

    #[test]
    fn enter_and_escape_are_not_edits() {
        assert!(request(&key(KeyCode::Enter, KeyModifiers::NONE)).is_none());
        assert!(request(&key(KeyCode::Esc, KeyModifiers::NONE)).is_none());
    }
}
