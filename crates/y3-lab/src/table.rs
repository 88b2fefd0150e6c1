//! The one table type of every report: column headings with their alignment, rows of cells,
//! each cell its text and, where it is a figure, its value. [`Table::markdown`] renders it
//! for the reports and README sections; [`Table::series`] hands its figures to a
//! [`BarChart`](crate::charts::BarChart), so that a chart shows what its table says.

/// How a column is aligned in Markdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text (`---`).
    Left,
    /// Figures (`--:`).
    Right,
}

/// One cell: its text and, for a figure, the value it shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    /// What the table shows.
    pub text: String,
    /// The figure behind the text, for charts.
    pub value: Option<f64>,
}

impl Cell {
    /// A figure: `value` shown as `text`.
    pub fn figure(value: f64, text: String) -> Cell {
        Cell {
            text,
            value: Some(value),
        }
    }

    /// A figure where measured, formatted by `fmt`; `–` where not.
    pub fn maybe(value: Option<f64>, fmt: impl Fn(f64) -> String) -> Cell {
        match value {
            Some(v) => Cell::figure(v, fmt(v)),
            None => Cell::from("–"),
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, value: None }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_string())
    }
}

/// A row: the key it is found by (an implementation, a case) and its cells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// What the row is of; not shown.
    pub key: String,
    /// One cell per column.
    pub cells: Vec<Cell>,
}

/// A table of a report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    /// Headings and alignment.
    pub columns: Vec<(String, Align)>,
    /// The rows, in order.
    pub rows: Vec<Row>,
}

impl Table {
    /// An empty table with these columns.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Align)>) -> Table {
        Table {
            columns: columns.into_iter().map(|(h, a)| (h.into(), a)).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row found by `key`.
    pub fn row(&mut self, key: &str, cells: Vec<Cell>) {
        self.rows.push(Row {
            key: key.into(),
            cells,
        });
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table in Markdown: a heading line, the alignment line, a line per row, each line
    /// ending with a newline. An empty cell is written `| |`.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            out.push('|');
            for c in cells {
                if !c.is_empty() {
                    out.push(' ');
                    out.push_str(c);
                }
                out.push_str(" |");
            }
            out.push('\n');
        };
        line(&mut out, &mut self.columns.iter().map(|(h, _)| h.as_str()));
        line(
            &mut out,
            &mut self.columns.iter().map(|(_, a)| match a {
                Align::Left => "---",
                Align::Right => "--:",
            }),
        );
        for r in &self.rows {
            line(&mut out, &mut r.cells.iter().map(|c| c.text.as_str()));
        }
        out
    }

    /// The row found by `key`.
    pub fn get(&self, key: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key == key)
    }

    /// Chart series: for each key in `keys` with a row, the key and the values of
    /// `columns` in that row (rows with no value there are left out).
    pub fn series(&self, keys: &[&str], columns: &[usize]) -> Vec<(String, Vec<Option<f64>>)> {
        keys.iter()
            .filter_map(|k| self.get(k))
            .map(|r| {
                let v: Vec<Option<f64>> = columns
                    .iter()
                    .map(|&c| r.cells.get(c).and_then(|x| x.value))
                    .collect();
                (r.key.clone(), v)
            })
            .filter(|(_, v)| v.iter().any(Option::is_some))
            .collect()
    }

    /// The headings of `columns`.
    pub fn headings(&self, columns: &[usize]) -> Vec<String> {
        columns
            .iter()
            .filter_map(|&c| self.columns.get(c).map(|(h, _)| h.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_and_series() {
        let mut t = Table::new([
            ("row", Align::Left),
            ("a", Align::Right),
            ("b", Align::Right),
        ]);
        t.row(
            "x",
            vec![
                "`x`".into(),
                Cell::figure(1.5, "1.5".into()),
                Cell::maybe(None, |v| v.to_string()),
            ],
        );
        t.row(
            "y",
            vec!["*y*".into(), "".into(), Cell::figure(2.0, "2".into())],
        );
        assert_eq!(
            t.markdown(),
            "| row | a | b |\n| --- | --: | --: |\n| `x` | 1.5 | – |\n| *y* | | 2 |\n"
        );
        assert_eq!(
            t.series(&["y", "z", "x"], &[1, 2]),
            [
                ("y".to_string(), vec![None, Some(2.0)]),
                ("x".to_string(), vec![Some(1.5), None])
            ]
        );
        assert_eq!(t.headings(&[2]), ["b"]);
    }
}
