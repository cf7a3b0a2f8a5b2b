//! The renderer: pulldown-cmark events to laid-out lines (blocks, lists, quotes, tables, code,
//! embedded blocks, links, math).

use super::*;

/// Content columns kept free of gutters, however deep the nesting.
pub(super) const MIN_CONTENT: usize = 12;
pub(super) const BULLETS: [&str; 3] = ["•", "◦", "▪"];

pub(super) enum Container {
    Quote,
    Item {
        marker: String,
        width: usize,
        used: bool,
    },
}

impl Container {
    pub(super) fn width(&self) -> usize {
        match self {
            Self::Quote => 2,
            Self::Item { width, .. } => *width,
        }
    }
}

/// What marks a link within the course: an arrow glued to the link text.
pub const LINK_MARK: &str = "→\u{a0}";

pub(super) struct Link {
    pub(super) dest: String,
    /// Where the link text starts in the inline buffer.
    pub(super) start: usize,
}

pub(super) struct Table {
    pub(super) aligns: Vec<Alignment>,
    pub(super) rows: Vec<Vec<Vec<Frag>>>,
    pub(super) current: Vec<Vec<Frag>>,
    pub(super) in_head: bool,
}

pub(super) struct Renderer<'o> {
    pub(super) width: usize,
    pub(super) theme: &'o Theme,
    pub(super) raw_tex: bool,
    pub(super) slides: bool,
    pub(super) out: Rendered,
    pub(super) containers: Vec<Container>,
    /// One entry per open list: the next number of an ordered list.
    pub(super) lists: Vec<Option<u64>>,
    pub(super) styles: Vec<Style>,
    pub(super) inline: Vec<Frag>,
    pub(super) links: Vec<Link>,
    /// Destinations of the internal links drawn so far, in order.
    pub(super) internal: Vec<String>,
    /// Fence info and body of the code block being read.
    pub(super) code: Option<(String, String)>,
    /// Alt text of the image being read.
    pub(super) image: Option<String>,
    pub(super) table: Option<Table>,
    pub(super) in_heading: bool,
    pub(super) pending_blank: bool,
}

impl<'o> Renderer<'o> {
    pub(super) fn new(opts: &RenderOptions<'o>) -> Self {
        Self {
            width: usize::from(opts.width).max(1),
            theme: opts.theme,
            raw_tex: opts.raw_tex,
            slides: opts.slides,
            out: Rendered::default(),
            containers: Vec::new(),
            lists: Vec::new(),
            styles: Vec::new(),
            inline: Vec::new(),
            links: Vec::new(),
            internal: Vec::new(),
            code: None,
            image: None,
            table: None,
            in_heading: false,
            pending_blank: false,
        }
    }

    pub(super) fn finish(mut self) -> Rendered {
        self.flush_inline();
        // Each internal link drew one `→` marker: pair them up, in order, with where they
        // landed after wrapping.
        let mut dests = std::mem::take(&mut self.internal).into_iter();
        for (i, line) in self.out.lines.iter().enumerate() {
            for span in &line.spans {
                for _ in span.content.matches(LINK_MARK) {
                    if let Some(dest) = dests.next() {
                        self.out.links.push(LinkRef { line: i, dest });
                    }
                }
            }
        }
        self.out
    }

    pub(super) fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().patch(self.theme.code);
                self.push_frag(&code, style);
            }
            Event::InlineMath(tex) => self.inline_math(&tex),
            Event::DisplayMath(tex) => self.display_math(&tex),
            Event::Html(html) | Event::InlineHtml(html) => {
                if is_line_break_tag(&html) {
                    self.inline.push(Frag::Break);
                }
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.inline.push(Frag::Break),
            Event::Rule => {
                self.start_block();
                let rule = "─".repeat(self.avail());
                self.emit_line(vec![Span::styled(rule, self.theme.border)]);
                self.pending_blank = true;
            }
            Event::FootnoteReference(name) => self.text(&format!("[{name}]")),
            Event::TaskListMarker(done) => {
                let (mark, style) = if done {
                    ("[x] ", self.theme.ok)
                } else {
                    ("[ ] ", self.theme.dim)
                };
                self.push_frag(mark, style);
            }
        }
    }

    pub(super) fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.start_block(),
            Tag::Heading { level, .. } => {
                self.start_block();
                self.in_heading = true;
                let style = match level {
                    HeadingLevel::H1 => self.theme.h1,
                    HeadingLevel::H2 => self.theme.h2,
                    _ => self.theme.h3,
                };
                self.styles.push(style);
            }
            Tag::BlockQuote(_) => {
                self.start_block();
                self.containers.push(Container::Quote);
            }
            Tag::CodeBlock(kind) => {
                self.start_block();
                let info = match kind {
                    CodeBlockKind::Fenced(info) => info.to_string(),
                    CodeBlockKind::Indented => String::new(),
                };
                self.code = Some((info, String::new()));
            }
            Tag::List(first) => {
                self.start_block();
                self.lists.push(first);
            }
            Tag::Item => self.start_item(),
            Tag::Table(aligns) => {
                self.start_block();
                self.table = Some(Table {
                    aligns,
                    rows: Vec::new(),
                    current: Vec::new(),
                    in_head: false,
                });
            }
            Tag::TableHead => {
                if let Some(table) = &mut self.table {
                    table.in_head = true;
                }
            }
            Tag::TableCell => {
                self.inline.clear();
                let head = self.table.as_ref().is_some_and(|t| t.in_head);
                self.styles.push(if head {
                    self.theme.strong
                } else {
                    Style::new()
                });
            }
            Tag::Emphasis => self.styles.push(self.theme.emphasis),
            Tag::Strong => self.styles.push(self.theme.strong),
            Tag::Strikethrough => self
                .styles
                .push(Style::new().add_modifier(Modifier::CROSSED_OUT)),
            Tag::Superscript | Tag::Subscript => self.styles.push(Style::new()),
            Tag::Link { dest_url, .. } => self.start_link(&dest_url),
            Tag::Image { .. } => self.image = Some(String::new()),
            _ => {}
        }
    }

    pub(super) fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => {
                self.flush_inline();
                self.pending_blank = true;
            }
            TagEnd::Heading(level) => self.end_heading(level),
            TagEnd::BlockQuote(_) => {
                self.flush_inline();
                if matches!(self.containers.last(), Some(Container::Quote)) {
                    self.containers.pop();
                }
                self.pending_blank = true;
            }
            TagEnd::CodeBlock => self.end_code_block(),
            TagEnd::List(_) => {
                self.flush_inline();
                self.lists.pop();
                // Nested lists end inside an item; only a whole list is a block of its own.
                self.pending_blank = self.lists.is_empty();
            }
            TagEnd::Item => self.end_item(),
            TagEnd::TableCell => {
                self.styles.pop();
                let cell = std::mem::take(&mut self.inline);
                if let Some(table) = &mut self.table {
                    table.current.push(cell);
                }
            }
            TagEnd::TableHead | TagEnd::TableRow => {
                if let Some(table) = &mut self.table {
                    let row = std::mem::take(&mut table.current);
                    table.rows.push(row);
                    table.in_head = false;
                }
            }
            TagEnd::Table => self.end_table(),
            TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript => {
                self.styles.pop();
            }
            TagEnd::Link => self.end_link(),
            TagEnd::Image => {
                if let Some(alt) = self.image.take() {
                    let text = format!("[image: {}]", alt.trim());
                    self.push_frag(&text, self.theme.dim);
                }
            }
            _ => {}
        }
    }

    // -- inline content ------------------------------------------------------------------------

    pub(super) fn style(&self) -> Style {
        let in_quote = self
            .containers
            .iter()
            .any(|c| matches!(c, Container::Quote));
        let base = if in_quote {
            self.theme.quote
        } else {
            self.theme.base
        };
        self.styles.iter().fold(base, |acc, s| acc.patch(*s))
    }

    pub(super) fn text(&mut self, text: &str) {
        if let Some((_, body)) = &mut self.code {
            body.push_str(text);
            return;
        }
        let style = self.style();
        self.push_frag(text, style);
    }

    pub(super) fn push_frag(&mut self, text: &str, style: Style) {
        let text = sanitize(text);
        if let Some(alt) = &mut self.image {
            alt.push_str(&text);
        } else if !text.is_empty() {
            self.inline.push(Frag::Text(text.into_owned(), style));
        }
    }

    pub(super) fn inline_math(&mut self, tex: &str) {
        let style = self.style().patch(self.theme.math);
        let text = if self.raw_tex {
            format!("${tex}$")
        } else {
            math::inline(tex).replace(' ', "\u{a0}")
        };
        self.push_frag(&text, style);
    }

    pub(super) fn display_math(&mut self, tex: &str) {
        let style = self.style().patch(self.theme.math);
        if self.raw_tex || self.image.is_some() {
            self.raw_display_math(tex, style);
            return;
        }
        if self.in_heading || self.table.is_some() {
            // No room to stack here: keep it in the line.
            self.push_frag(&math::inline(tex).replace(' ', "\u{a0}"), style);
            return;
        }
        let lines = math::display(tex);
        let avail = self.avail();
        let widest = lines.iter().map(|l| str_width(l)).max().unwrap_or(0);
        self.flush_inline();
        if widest > avail {
            // Too wide to stack: fall back to the wrapped one-line form.
            self.push_frag(&math::inline(tex), style);
            self.flush_inline();
            return;
        }
        for line in lines {
            let indent = " ".repeat((avail - str_width(&line)) / 2);
            self.emit_line(vec![Span::raw(indent), Span::styled(line, style)]);
        }
    }

    pub(super) fn raw_display_math(&mut self, tex: &str, style: Style) {
        if !self.inline.is_empty() {
            self.inline.push(Frag::Break);
        }
        let raw = format!("$${tex}$$");
        for (i, line) in raw.split('\n').enumerate() {
            if i > 0 {
                self.inline.push(Frag::Break);
            }
            self.push_frag(line, style);
        }
        self.inline.push(Frag::Break);
    }

    pub(super) fn start_link(&mut self, dest: &str) {
        if !is_external(dest) {
            let style = self
                .style()
                .patch(self.theme.link)
                .remove_modifier(Modifier::UNDERLINED);
            self.push_frag(LINK_MARK, style);
            self.internal.push(dest.to_string());
        }
        self.styles.push(self.theme.link);
        self.links.push(Link {
            dest: dest.to_string(),
            start: self.inline.len(),
        });
    }

    pub(super) fn end_link(&mut self) {
        self.styles.pop();
        let Some(link) = self.links.pop() else { return };
        if !is_external(&link.dest) {
            return;
        }
        let text = plain_text(self.inline.get(link.start..).unwrap_or_default());
        let bare = link.dest.strip_prefix("mailto:").unwrap_or(&link.dest);
        if text != link.dest && text != bare {
            let url = format!(" ({})", link.dest);
            self.push_frag(&url, self.theme.dim);
        }
    }

    // -- blocks and lines ----------------------------------------------------------------------

    /// Columns taken by gutters and list indents (capped so content keeps `MIN_CONTENT`).
    pub(super) fn prefix_width(&self) -> usize {
        let total: usize = self.containers.iter().map(Container::width).sum();
        total.min(self.width.saturating_sub(MIN_CONTENT.min(self.width)))
    }

    /// Columns available to content on the current line.
    pub(super) fn avail(&self) -> usize {
        self.width.saturating_sub(self.prefix_width()).max(1)
    }

    /// Gutters and list markers for the next line; a list marker shows on its item's first
    /// content line only, and blank lines keep just the quote bars.
    pub(super) fn prefix(&mut self, blank: bool) -> Vec<Span<'static>> {
        let width = self.prefix_width();
        let (quote, marker) = (self.theme.quote, self.theme.accent);
        let mut spans = Vec::with_capacity(self.containers.len());
        for container in &mut self.containers {
            match container {
                Container::Quote => spans.push(Span::styled("│ ", quote)),
                Container::Item {
                    marker: text, used, ..
                } if !*used && !blank => {
                    *used = true;
                    spans.push(Span::styled(text.clone(), marker));
                }
                Container::Item { width, .. } => spans.push(Span::raw(" ".repeat(*width))),
            }
        }
        let mut spans = truncate_spans(spans, width);
        if blank {
            while spans.last().is_some_and(|s| s.content.trim().is_empty()) {
                spans.pop();
            }
            if let Some(last) = spans.last_mut() {
                *last = Span::styled(last.content.trim_end().to_string(), last.style);
            }
        }
        spans
    }

    pub(super) fn push_line(&mut self, line: Line<'static>) {
        self.out.lines.push(fit_line(line, self.width));
    }

    pub(super) fn emit_line(&mut self, content: Vec<Span<'static>>) {
        let mut spans = self.prefix(false);
        spans.extend(content);
        self.push_line(Line::from(spans));
    }

    pub(super) fn blank_line(&mut self) {
        let spans = self.prefix(true);
        self.push_line(Line::from(spans));
    }

    /// Before a block: finish pending inline text, then separate with a blank line.
    pub(super) fn start_block(&mut self) {
        self.flush_inline();
        if self.pending_blank && !self.out.lines.is_empty() {
            self.blank_line();
        }
        self.pending_blank = false;
    }

    pub(super) fn flush_inline(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let frags = std::mem::take(&mut self.inline);
        for line in wrap(&frags, self.avail()) {
            self.emit_line(line);
        }
    }

    pub(super) fn end_heading(&mut self, level: HeadingLevel) {
        self.styles.pop();
        self.in_heading = false;
        let frags = std::mem::take(&mut self.inline);
        let line = self.out.lines.len();
        let avail = self.avail();
        let lines = wrap(&frags, avail);
        let title_width = lines.iter().map(|l| spans_width(l)).max().unwrap_or(0);
        for l in lines {
            self.emit_line(l);
        }
        let rule = match level {
            HeadingLevel::H1 => Some(("═", avail, self.theme.h1)),
            HeadingLevel::H2 => Some(("─", title_width, self.theme.h2)),
            _ => None,
        };
        if let Some((ch, n, style)) = rule.filter(|r| r.1 > 0) {
            let style = style.remove_modifier(Modifier::UNDERLINED);
            self.emit_line(vec![Span::styled(ch.repeat(n), style)]);
        }
        self.out.headings.push(HeadingRef {
            rows: self.out.lines.len() - line,
            line,
            level: heading_number(level),
            title: plain_text(&frags),
        });
        self.pending_blank = true;
    }

    pub(super) fn start_item(&mut self) {
        let depth = self.lists.len().saturating_sub(1);
        let marker = match self.lists.last_mut() {
            Some(Some(n)) => {
                let m = format!("{n}. ");
                *n = n.saturating_add(1);
                m
            }
            _ => format!("{} ", BULLETS[depth % BULLETS.len()]),
        };
        let width = str_width(&marker);
        self.containers.push(Container::Item {
            marker,
            width,
            used: false,
        });
    }

    pub(super) fn end_item(&mut self) {
        self.flush_inline();
        if let Some(Container::Item { used, .. }) = self.containers.last() {
            if !*used {
                self.emit_line(Vec::new()); // an empty item still shows its marker
            }
            self.containers.pop();
        }
    }

    // -- code blocks and embeds ----------------------------------------------------------------

    pub(super) fn end_code_block(&mut self) {
        let Some((info, body)) = self.code.take() else {
            return;
        };
        match BlockKind::from_info(&info) {
            Some(kind) => self.embed(kind, &body),
            None => self.code_block(&info, &body),
        }
        self.pending_blank = true;
    }

    pub(super) fn code_block(&mut self, info: &str, body: &str) {
        let lang = info.split_whitespace().next().unwrap_or("");
        let width = self.avail().saturating_sub(4).max(1);
        if body.is_empty() {
            self.code_rows(&[], width);
            return;
        }
        let highlighted = if self.theme.mono {
            None
        } else {
            highlight(lang, body)
        };
        match highlighted {
            Some(lines) => {
                for line in lines.iter() {
                    let pieces: Vec<(Style, &str)> = line
                        .iter()
                        .map(|(style, text)| (*style, text.as_str()))
                        .collect();
                    self.code_rows(&pieces, width);
                }
            }
            None => {
                for raw in LinesWithEndings::from(body) {
                    let line = code_text(raw);
                    self.code_rows(&[(self.theme.code_block, &line)], width);
                }
            }
        }
    }

    /// One source line of code, wrapped at `width` behind a gutter.
    pub(super) fn code_rows(&mut self, pieces: &[(Style, &str)], width: usize) {
        let mut rows = Wrapper {
            width,
            lines: Vec::new(),
            line: LineBuf::default(),
            word: Vec::new(),
            word_width: 0,
            space: None,
        };
        for (style, text) in pieces {
            rows.push_code(text.trim_end_matches(['\n', '\r']), *style);
        }
        let mut lines = rows.finish();
        if lines.is_empty() {
            lines.push(Vec::new());
        }
        for (i, row) in lines.into_iter().enumerate() {
            let gutter = if i == 0 { "  │ " } else { "  ┆ " };
            let mut spans = vec![Span::styled(gutter, self.theme.border)];
            spans.extend(row);
            self.emit_line(spans);
        }
    }

    pub(super) fn embed(&mut self, kind: BlockKind, body: &str) {
        let first = self.out.lines.len();
        match Block::parse(kind, body) {
            Ok(Block::Table(t)) => match crate::course::table::rows(&t) {
                Ok((head, rows)) => {
                    self.computed_table(head, rows, &crate::course::table::caption(&t))
                }
                Err(e) => self.boxed(kind.name(), &e, self.theme.error),
            },
            Ok(block) => {
                let text = if self.slides {
                    block.slide_placeholder()
                } else {
                    block.placeholder()
                };
                self.boxed(kind.name(), &text, self.theme.placeholder);
                let height = self.out.lines.len() - first;
                self.out.embeds.push(EmbedRef {
                    line: first,
                    height,
                    block,
                });
            }
            Err(e) => {
                let text = format!("line {}, col {}: {}", e.line, e.col, e.message);
                self.boxed(kind.name(), &text, self.theme.error);
            }
        }
    }

    /// A ```` ```table ```` block: drawn like any Markdown table (numbers right-aligned), with a
    /// dim caption saying where the numbers come from.
    pub(super) fn computed_table(
        &mut self,
        head: Vec<String>,
        rows: Vec<Vec<String>>,
        caption: &str,
    ) {
        let cell = |text: String, style: Style| vec![Frag::Text(text, style)];
        let mut grid = vec![
            head.into_iter()
                .map(|h| cell(h, self.theme.strong))
                .collect(),
        ];
        grid.extend(
            rows.into_iter()
                .map(|r| r.into_iter().map(|c| cell(c, Style::new())).collect()),
        );
        let columns = grid.first().map_or(0, Vec::len);
        self.table = Some(Table {
            aligns: vec![Alignment::Right; columns],
            rows: grid,
            current: Vec::new(),
            in_head: false,
        });
        self.end_table();
        let caption = [Frag::Text(
            format!("{caption}: computed from the schedule module"),
            self.theme.dim,
        )];
        for line in wrap(&caption, self.avail()) {
            self.emit_line(line);
        }
    }

    /// A full-width box titled `title` holding wrapped `text`.
    pub(super) fn boxed(&mut self, title: &str, text: &str, style: Style) {
        let width = self.avail().max(6);
        let inner = width - 4;
        let border = self.theme.border;
        let title = format!(" {title} ");
        let top_fill = width.saturating_sub(2 + str_width(&title));
        self.emit_line(vec![
            Span::styled("┌", border),
            Span::styled(title, border.add_modifier(Modifier::BOLD)),
            Span::styled(format!("{}┐", "─".repeat(top_fill)), border),
        ]);
        // `inline code` in a box's text is drawn as code, as in the lesson around it.
        let frags: Vec<Frag> = inline_code(&sanitize(text), style, self.theme.code)
            .into_iter()
            .map(|s| Frag::Text(s.content.into_owned(), s.style))
            .collect();
        for row in wrap(&frags, inner) {
            let used = spans_width(&row);
            let mut spans = vec![Span::styled("│ ", border)];
            spans.extend(row);
            pad_to(&mut spans, used, inner);
            spans.push(Span::styled(" │", border));
            self.emit_line(spans);
        }
        let bottom = format!("└{}┘", "─".repeat(width - 2));
        self.emit_line(vec![Span::styled(bottom, border)]);
    }

    // -- tables --------------------------------------------------------------------------------

    pub(super) fn end_table(&mut self) {
        let Some(table) = self.table.take() else {
            return;
        };
        self.pending_blank = true;
        let columns = table
            .rows
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0)
            .max(table.aligns.len());
        if columns == 0 {
            return;
        }
        let avail = self.avail();
        let overhead = 3 * columns + 1;
        if avail < overhead + 3 * columns {
            self.table_as_text(&table);
            return;
        }
        let natural: Vec<usize> = (0..columns)
            .map(|c| {
                let cells = table.rows.iter().filter_map(|r| r.get(c));
                cells
                    .map(|cell| natural_width(cell))
                    .max()
                    .unwrap_or(0)
                    .max(1)
            })
            .collect();
        // Each column's longest word: a column narrower than that cuts a word in two.
        let words: Vec<usize> = (0..columns)
            .map(|c| {
                table
                    .rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|cell| longest_word(cell))
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        let widths = fit_columns_keeping_words(&natural, &words, avail - overhead);
        self.table_border('┌', '┬', '┐', &widths);
        for (r, row) in table.rows.iter().enumerate() {
            self.table_row(row, &widths, &table.aligns);
            if r == 0 && table.rows.len() > 1 {
                self.table_border('├', '┼', '┤', &widths);
            }
        }
        self.table_border('└', '┴', '┘', &widths);
    }

    pub(super) fn table_border(&mut self, left: char, mid: char, right: char, widths: &[usize]) {
        let mut s = String::new();
        s.push(left);
        for (i, w) in widths.iter().enumerate() {
            if i > 0 {
                s.push(mid);
            }
            s.extend(std::iter::repeat_n('─', w + 2));
        }
        s.push(right);
        self.emit_line(vec![Span::styled(s, self.theme.border)]);
    }

    pub(super) fn table_row(&mut self, row: &[Vec<Frag>], widths: &[usize], aligns: &[Alignment]) {
        let empty = Vec::new();
        let cells: Vec<Vec<Vec<Span<'static>>>> = widths
            .iter()
            .enumerate()
            .map(|(c, w)| wrap(row.get(c).unwrap_or(&empty), *w))
            .collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let border = self.theme.border;
        for i in 0..height {
            let mut spans = vec![Span::styled("│ ", border)];
            for (c, w) in widths.iter().enumerate() {
                if c > 0 {
                    spans.push(Span::styled(" │ ", border));
                }
                let content = cells
                    .get(c)
                    .and_then(|l| l.get(i))
                    .cloned()
                    .unwrap_or_default();
                let align = aligns.get(c).copied().unwrap_or(Alignment::None);
                aligned(&mut spans, content, *w, align);
            }
            spans.push(Span::styled(" │", border));
            self.emit_line(spans);
        }
    }

    /// Too narrow for a grid: one wrapped line per row, cells separated by ` │ `.
    pub(super) fn table_as_text(&mut self, table: &Table) {
        for row in &table.rows {
            let mut frags = Vec::new();
            for (c, cell) in row.iter().enumerate() {
                if c > 0 {
                    frags.push(Frag::Text(" │ ".to_string(), self.theme.border));
                }
                frags.extend(cell.iter().cloned());
            }
            for line in wrap(&frags, self.avail()) {
                self.emit_line(line);
            }
        }
    }
}

/// Width of a cell laid out on one line.
pub(super) fn natural_width(cell: &[Frag]) -> usize {
    wrap(cell, usize::MAX / 4)
        .iter()
        .map(|l| spans_width(l))
        .max()
        .unwrap_or(0)
}

/// The widest word in a cell ("reduce-scatter"), in columns.
pub(super) fn longest_word(cell: &[Frag]) -> usize {
    plain_text(cell)
        .split_whitespace()
        .map(str_width)
        .max()
        .unwrap_or(0)
}

/// As [`fit_columns`], but no column narrower than its longest word where the words fit
/// side by side: the widest columns shrink first, down to their longest word.
pub(super) fn fit_columns_keeping_words(
    natural: &[usize],
    words: &[usize],
    target: usize,
) -> Vec<usize> {
    let floor: Vec<usize> = natural
        .iter()
        .zip(words)
        .map(|(&n, &w)| w.clamp(1, n.max(1)))
        .collect();
    if natural.iter().sum::<usize>() <= target || floor.iter().sum::<usize>() > target {
        return fit_columns(natural, target);
    }
    let width_at = |cap: usize| -> Vec<usize> {
        natural
            .iter()
            .zip(&floor)
            .map(|(&n, &f)| n.min(cap.max(f)))
            .collect()
    };
    let (mut lo, mut hi) = (1, natural.iter().copied().max().unwrap_or(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if width_at(mid).iter().sum::<usize>() <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut widths = width_at(lo);
    let mut left = target.saturating_sub(widths.iter().sum());
    for (w, &n) in widths.iter_mut().zip(natural) {
        if left > 0 && *w < n {
            *w += 1;
            left -= 1;
        }
    }
    widths
}

/// Column widths summing to at most `target`: the widest columns shrink first.
pub(super) fn fit_columns(natural: &[usize], target: usize) -> Vec<usize> {
    if natural.iter().sum::<usize>() <= target {
        return natural.to_vec();
    }
    let total_at = |cap: usize| natural.iter().map(|&n| n.min(cap)).sum::<usize>();
    let (mut lo, mut hi) = (1, natural.iter().copied().max().unwrap_or(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if total_at(mid) <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut widths: Vec<usize> = natural.iter().map(|&n| n.min(lo)).collect();
    let mut left = target.saturating_sub(widths.iter().sum());
    for (w, &n) in widths.iter_mut().zip(natural) {
        if left > 0 && *w < n {
            *w += 1;
            left -= 1;
        }
    }
    widths
}

pub(super) fn aligned(
    spans: &mut Vec<Span<'static>>,
    content: Vec<Span<'static>>,
    width: usize,
    align: Alignment,
) {
    let free = width.saturating_sub(spans_width(&content));
    let left = match align {
        Alignment::Right => free,
        Alignment::Center => free / 2,
        Alignment::Left | Alignment::None => 0,
    };
    if left > 0 {
        spans.push(Span::raw(" ".repeat(left)));
    }
    spans.extend(content);
    if free > left {
        spans.push(Span::raw(" ".repeat(free - left)));
    }
}

pub(super) fn heading_number(level: HeadingLevel) -> u8 {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

pub(super) fn is_external(dest: &str) -> bool {
    ["http://", "https://", "mailto:", "ftp://"]
        .iter()
        .any(|p| dest.starts_with(p))
}

pub(super) fn is_line_break_tag(html: &str) -> bool {
    let tag: String = html
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_lowercase();
    matches!(tag.as_str(), "<br>" | "<br/>")
}
