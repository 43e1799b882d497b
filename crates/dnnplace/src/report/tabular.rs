//! The one table renderer of the reports: a header and rows of cells, printed as aligned
//! text, as Markdown or as an HTML table. `compare`, `reproduce` and `bench` build a [`Table`] and choose the
//! format; nothing else lays out columns.
//!
//! Text: column j is as wide as its widest cell w_j (counted in characters, not bytes),
//! cells are padded to w_j on the side [`Align`] says and joined by two spaces, and
//! trailing spaces are trimmed. Markdown: `| a | b |` lines with a `| --- |` rule under the
//! header; a `|` inside a cell is escaped. A row may have fewer cells than the header (a
//! row that failed as a whole). O(total characters).

use std::fmt::Write;

/// Which side of its column a cell sits on in text output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A header and rows of cells.
#[derive(Clone, Debug, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with this header, every column left-aligned.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        let header: Vec<String> = header.into_iter().map(Into::into).collect();
        let align = vec![Align::Left; header.len()];
        Table {
            header,
            align,
            rows: Vec::new(),
        }
    }

    /// Sets how each column is aligned in text output (one entry per column).
    pub fn aligned(mut self, align: impl IntoIterator<Item = Align>) -> Table {
        self.align = align.into_iter().collect();
        self.align.resize(self.header.len(), Align::Left);
        self
    }

    /// Appends a row.
    pub fn push<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(Into::into).collect());
    }

    /// Number of rows (the header not counted).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// An HTML `<table>` (header in `<th>`, cells escaped by `escape`).
    pub fn html(&self, escape: impl Fn(&str) -> String) -> String {
        let mut out = String::from("<table>\n<tr>");
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        out
    }

    /// Aligned text, one line per row after the header.
    pub fn text(&self) -> String {
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (j, cell) in row.iter().enumerate() {
                if j < width.len() {
                    width[j] = width[j].max(cell.chars().count());
                }
            }
        }
        let mut s = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (j, cell) in row.iter().enumerate() {
                if j > 0 {
                    line.push_str("  ");
                }
                let pad = " ".repeat(
                    width
                        .get(j)
                        .copied()
                        .unwrap_or(0)
                        .saturating_sub(cell.chars().count()),
                );
                match self.align.get(j).copied().unwrap_or(Align::Left) {
                    Align::Left => {
                        line.push_str(cell);
                        line.push_str(&pad);
                    }
                    Align::Right => {
                        line.push_str(&pad);
                        line.push_str(cell);
                    }
                }
            }
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }

    /// A Markdown table.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let line = |s: &mut String, row: &[String]| {
            let cells: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
            let _ = writeln!(s, "| {} |", cells.join(" | "));
        };
        line(&mut s, &self.header);
        let _ = writeln!(s, "|{}", " --- |".repeat(self.header.len()));
        for row in &self.rows {
            line(&mut s, row);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t =
            Table::new(["name", "value", "note"]).aligned([Align::Left, Align::Right, Align::Left]);
        t.push(["a", "1.5", "ok"]);
        t.push(["long name", "12.25", ""]);
        t
    }

    #[test]
    fn text_pads_each_column_to_its_widest_cell() {
        let text = sample().text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "name       value  note",
                "a            1.5  ok",
                "long name  12.25"
            ]
        );
    }

    #[test]
    fn text_counts_characters_not_bytes() {
        let mut t = Table::new(["x", "y"]).aligned([Align::Right, Align::Left]);
        t.push(["—", "z"]);
        assert_eq!(t.text(), "x  y\n—  z\n");
    }

    #[test]
    fn markdown_escapes_pipes_and_allows_short_rows() {
        let mut t = sample();
        t.push(["broken", "error: a | b"]);
        let md = t.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(lines[0], "| name | value | note |");
        assert_eq!(lines[1], "| --- | --- | --- |");
        assert_eq!(lines[3], "| long name | 12.25 |  |");
        assert_eq!(lines[4], "| broken | error: a \\| b |");
    }
}
