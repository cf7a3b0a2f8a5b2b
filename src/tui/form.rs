//! Forms: a column of fields, one focused, whose values step with ←/→. A screen describes its
//! fields once ([`FormModel`]: each field's label, value, how it steps, and what the whole form
//! says after a change); [`Form`] keeps the focus, handles the keys and draws the column.

use ratatui::text::{Line, Span};

use crate::tui::app::Action;
use crate::tui::theme::Theme;

/// What a form edits.
pub trait FormModel {
    /// The fields, top to bottom.
    type Field: Copy + 'static;
    const FIELDS: &'static [Self::Field];
    fn label(field: Self::Field) -> &'static str;
    /// The field's value as shown.
    fn value(&self, field: Self::Field) -> String;
    /// Step the field's value: +1 next, -1 previous.
    fn adjust(&mut self, field: Self::Field, d: i32);
    /// What [`FormModel::validate`] finds wrong.
    type Error: std::fmt::Display;
    /// Recompute what the form means after a change; the problem, if there is one.
    fn validate(&mut self) -> Result<(), Self::Error>;
    /// A field whose value is typed (Enter), not stepped: drawn with ⏎ instead of ◀ ▶.
    fn typed(_field: Self::Field) -> bool {
        false
    }
}

/// The focus of a form.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Form {
    /// Index into [`FormModel::FIELDS`].
    pub focus: usize,
    /// Moving past the last field comes back to the first (a row of fields); otherwise the
    /// focus stops at the ends (a column).
    pub wrap: bool,
}

impl Form {
    /// A row of fields whose focus wraps around.
    pub fn wrapping() -> Self {
        Self {
            focus: 0,
            wrap: true,
        }
    }

    /// The focused field.
    pub fn focused<M: FormModel>(&self) -> Option<M::Field> {
        M::FIELDS.get(self.focus).copied()
    }

    /// Handle a form key: `Move` changes the focus (clamped), `Adjust` steps the focused field
    /// and validates. Returns the validation's problem after an `Adjust`; None for other actions.
    pub fn update<M: FormModel>(&mut self, model: &mut M, action: Action) -> Option<String> {
        match action {
            Action::Move(d) => {
                let n = M::FIELDS.len().max(1) as isize;
                let to = self.focus as isize + d as isize;
                self.focus = if self.wrap {
                    to.rem_euclid(n)
                } else {
                    to.clamp(0, n - 1)
                } as usize;
                None
            }
            Action::Adjust(d) => {
                let f = self.focused::<M>()?;
                model.adjust(f, d);
                model.validate().err().map(|e| e.to_string())
            }
            _ => None,
        }
    }

    /// The column of fields with the focused one marked (▶ and the selection style).
    pub fn lines<M: FormModel>(&self, model: &M, t: &Theme) -> Vec<Line<'static>> {
        // Labels padded to the longest plus one space, so `◀` never touches a label.
        let w = M::FIELDS
            .iter()
            .map(|&f| M::label(f).chars().count())
            .max()
            .unwrap_or(0)
            + 1;
        M::FIELDS
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                let (label, value) = (M::label(f), model.value(f));
                if i == self.focus && M::typed(f) {
                    Line::from(vec![
                        Span::styled(format!("▶ {label:<w$}"), t.selection),
                        Span::styled(format!("  {value} "), t.selection),
                        Span::styled("⏎", t.dim),
                    ])
                } else if i == self.focus {
                    Line::from(vec![
                        Span::styled(format!("▶ {label:<w$}"), t.selection),
                        Span::styled(format!("◀ {value} ▶"), t.selection),
                    ])
                } else {
                    Line::from(vec![
                        Span::styled(format!("  {label:<w$}"), t.dim),
                        Span::raw(format!("  {value}")),
                    ])
                }
            })
            .collect()
    }
}

/// The next value after (d > 0) or before (d < 0) `cur` in the sorted `steps`, clamped.
pub fn step<T: Copy + PartialOrd>(steps: &[T], cur: T, d: i32) -> T {
    let next = if d > 0 {
        steps.iter().copied().find(|&v| v > cur)
    } else {
        steps.iter().rev().copied().find(|&v| v < cur)
    };
    next.unwrap_or(cur)
}

/// `i` moved by the sign of `d` through `len` choices, wrapping.
pub fn cycle(i: usize, len: usize, d: i32) -> usize {
    let n = len.max(1) as isize;
    (i as isize + d.signum() as isize).rem_euclid(n) as usize
}

/// `lines` wrapped to `width` (each keeping its indent, [`keep_indent`]) as they fit `height`:
/// when they do not, whole lines give way at the tail to one dim line saying how many rows did
/// not fit, so nothing is cut silently and no sentence stops mid-way.
///
/// [`keep_indent`]: crate::tui::markdown::keep_indent
/// A pane whose text can outgrow it for long scrolls instead ([`crate::tui::scroll::Pane`]);
/// this is for what fits but for an extreme (the hang lab's board with dozens of ranks).
pub fn fit_lines(
    lines: Vec<Line<'static>>,
    width: u16,
    height: u16,
    t: &Theme,
) -> Vec<Line<'static>> {
    let groups: Vec<Vec<Line<'static>>> = lines
        .into_iter()
        .map(|l| crate::tui::markdown::keep_indent(vec![l], width.max(1) as usize))
        .collect();
    // An aligned row left whole still takes as many rows as the Paragraph wraps it into.
    let w = width.max(1) as usize;
    let rows =
        |g: &Vec<Line<'static>>| -> usize { g.iter().map(|l| l.width().max(1).div_ceil(w)).sum() };
    let total: usize = groups.iter().map(rows).sum();
    if total <= height as usize || height == 0 {
        return groups.into_iter().flatten().collect();
    }
    // Room for the marker's one row.
    let mut used = 1;
    let keep = groups
        .iter()
        .take_while(|g| {
            used += rows(g);
            used <= height as usize
        })
        .count();
    let hidden: usize = groups[keep..].iter().map(rows).sum();
    let mut lines: Vec<Line<'static>> = groups.into_iter().take(keep).flatten().collect();
    lines.push(more_marker(hidden, t));
    lines
}

/// "… 3 more lines on a taller terminal": what a pane that does not scroll left out.
pub fn more_marker(hidden: usize, t: &Theme) -> Line<'static> {
    // Nothing scrolls these panes: the remedy is room.
    Line::styled(
        format!(
            "… {} on a taller terminal",
            crate::units::count(hidden, "more line")
        ),
        t.dim,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Two {
        a: u32,
        b: u32,
    }

    #[derive(Clone, Copy)]
    enum F {
        A,
        B,
    }

    impl FormModel for Two {
        type Field = F;
        const FIELDS: &'static [F] = &[F::A, F::B];
        fn label(f: F) -> &'static str {
            match f {
                F::A => "a",
                F::B => "b",
            }
        }
        fn value(&self, f: F) -> String {
            match f {
                F::A => self.a.to_string(),
                F::B => self.b.to_string(),
            }
        }
        fn adjust(&mut self, f: F, d: i32) {
            match f {
                F::A => self.a = step(&[1, 2, 4], self.a, d),
                F::B => self.b = step(&[1, 3], self.b, d),
            }
        }
        type Error = String;
        fn validate(&mut self) -> Result<(), String> {
            if self.a == 4 && self.b == 3 {
                Err("4 and 3 do not go together".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn focus_clamps_adjust_steps_the_focused_field_and_validates() {
        let mut m = Two { a: 1, b: 1 };
        let mut f = Form::default();
        assert_eq!(f.update(&mut m, Action::Move(-1)), None);
        assert_eq!(f.focus, 0);
        f.update(&mut m, Action::Adjust(1));
        f.update(&mut m, Action::Adjust(1));
        f.update(&mut m, Action::Adjust(1));
        assert_eq!(m.a, 4, "clamped at the last step");
        f.update(&mut m, Action::Move(5));
        assert_eq!(f.focus, 1);
        assert_eq!(
            f.update(&mut m, Action::Adjust(1)).as_deref(),
            Some("4 and 3 do not go together")
        );
        let lines = f.lines(&m, &Theme::mono());
        assert_eq!(lines.len(), 2);
        assert!(lines[1].spans[0].content.starts_with('▶'));
        assert_eq!(cycle(0, 3, -1), 2);
        let mut row = Form::wrapping();
        row.update(&mut m, Action::Move(-1));
        assert_eq!(row.focus, 1, "a row wraps from the first field to the last");
        row.update(&mut m, Action::Move(1));
        assert_eq!(row.focus, 0);
    }
}
