//! A tiny JSON writer for the report (one object, written once per run).

pub struct Writer {
    out: String,
    /// Per open container: whether it already has an element.
    stack: Vec<bool>,
    after_key: bool,
}

impl Default for Writer {
    fn default() -> Self {
        Self::new()
    }
}

impl Writer {
    pub fn new() -> Writer {
        Writer {
            out: String::new(),
            stack: Vec::new(),
            after_key: false,
        }
    }

    fn sep(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(has) = self.stack.last_mut() {
            if *has {
                self.out.push(',');
            }
            *has = true;
        }
    }

    pub fn begin_obj(&mut self) {
        self.sep();
        self.out.push('{');
        self.stack.push(false);
    }

    pub fn end_obj(&mut self) {
        self.stack.pop();
        self.out.push('}');
    }

    pub fn begin_arr(&mut self) {
        self.sep();
        self.out.push('[');
        self.stack.push(false);
    }

    pub fn end_arr(&mut self) {
        self.stack.pop();
        self.out.push(']');
    }

    pub fn key(&mut self, k: &str) {
        self.sep();
        self.escaped(k);
        self.out.push(':');
        self.after_key = true;
    }

    pub fn str(&mut self, s: &str) {
        self.sep();
        self.escaped(s);
    }

    fn escaped(&mut self, s: &str) {
        self.out.push('"');
        for ch in s.chars() {
            match ch {
                '"' => self.out.push_str("\\\""),
                '\\' => self.out.push_str("\\\\"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                c if (c as u32) < 0x20 => self.out.push_str(&format!("\\u{:04x}", c as u32)),
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }

    pub fn field_str(&mut self, k: &str, v: &str) {
        self.key(k);
        self.str(v);
    }

    pub fn field_u64(&mut self, k: &str, v: u64) {
        self.key(k);
        self.sep();
        self.out.push_str(&v.to_string());
    }

    /// Non-finite numbers become null (JSON has no NaN or infinity).
    pub fn field_f64(&mut self, k: &str, v: f64) {
        self.key(k);
        self.sep();
        if v.is_finite() {
            let rounded = (v * 1e6).round() / 1e6;
            self.out.push_str(&format!("{rounded}"));
        } else {
            self.out.push_str("null");
        }
    }

    pub fn field_bool(&mut self, k: &str, v: bool) {
        self.key(k);
        self.sep();
        self.out.push_str(if v { "true" } else { "false" });
    }

    pub fn field_null(&mut self, k: &str) {
        self.key(k);
        self.sep();
        self.out.push_str("null");
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_nested_valid_json() {
        let mut w = Writer::new();
        w.begin_obj();
        w.field_str("a", "x\"y\n");
        w.field_u64("n", 3);
        w.field_f64("f", 1.23456);
        w.field_f64("nan", f64::NAN);
        w.key("arr");
        w.begin_arr();
        w.str("p");
        w.str("q");
        w.end_arr();
        w.key("o");
        w.begin_obj();
        w.field_bool("b", true);
        w.field_null("z");
        w.end_obj();
        w.end_obj();
        assert_eq!(
            w.finish(),
            r#"{"a":"x\"y\n","n":3,"f":1.23456,"nan":null,"arr":["p","q"],"o":{"b":true,"z":null}}"#
        );
    }
}
