//! Chat templates: the GGUF's own `tokenizer.chat_template` (Jinja) rendered by minijinja the
//! way llama.cpp renders it (common/chat.cpp: `trim_blocks` and `lstrip_blocks` on; `messages`,
//! `add_generation_prompt`, `bos_token`, `eos_token` in the context; a leading BOS the tokenizer
//! adds anyway cut from the text, as a trailing EOS it appends), Python's string methods
//! (`.strip()`, `.startswith()`, ...) through minijinja-contrib's pycompat, and
//! `raise_exception` as transformers defines it. A file without a template gets plain ChatML where
//! its vocabulary has ChatML's tokens (`GgufTokenizer::chat_template`), else an error.
//!
//! A template comes from the file, so it is untrusted code: it runs under a fuel budget (every
//! instruction and every allocated value spend it; [`FUEL`]), a recursion limit
//! ([`RECURSION_LIMIT`]) and a size limit on its source ([`MAX_TEMPLATE_BYTES`]); past any of
//! them rendering stops with an error instead of hanging or filling memory.

use crate::error::{ModelError, Result};
use minijinja::{context, Environment, Error, ErrorKind, Value};

/// Plain ChatML (no default system message): the template when the file has none.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// A render's budget: minijinja charges about one unit per instruction and one per ~64 bytes
/// allocated, so ~1e6 instructions or ~64 MiB. Real templates spend a few hundred units per
/// message (SmolLM2's 3-message conversation: under 200).
pub const FUEL: u64 = 1_000_000;
/// Nesting of loops, conditions, macro calls (minijinja's default is 500).
pub const RECURSION_LIMIT: usize = 100;
/// Largest template source accepted (real ones are a few KiB; the largest known ~20 KiB).
pub const MAX_TEMPLATE_BYTES: usize = 1 << 20;

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// A chat template with the special tokens it is given.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    /// Whether the source is the file's (false: the ChatML fallback).
    from_file: bool,
    bos_token: String,
    eos_token: String,
    /// The tokenizer adds BOS / EOS itself: cut the template's own from the text.
    add_bos: bool,
    add_eos: bool,
}

impl ChatTemplate {
    /// `source` (None: ChatML) with the vocabulary's BOS and EOS text and whether the tokenizer
    /// adds them.
    pub fn new(source: Option<&str>, bos_token: &str, eos_token: &str, add_bos: bool, add_eos: bool) -> ChatTemplate {
        ChatTemplate {
            source: source.unwrap_or(CHATML_TEMPLATE).to_string(),
            from_file: source.is_some(),
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
            add_bos,
            add_eos,
        }
    }

    /// The template's Jinja source.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether the template is the model file's own (false: the ChatML fallback).
    pub fn is_from_file(&self) -> bool {
        self.from_file
    }

    /// The prompt text for `messages`; `add_generation_prompt` opens the assistant's turn.
    pub fn apply(&self, messages: &[Message], add_generation_prompt: bool) -> Result<String> {
        let bad = |e: Error| ModelError::Unsupported(format!("chat template: {e:#}"));
        if self.source.len() > MAX_TEMPLATE_BYTES {
            return Err(ModelError::Unsupported(format!(
                "chat template of {} bytes (at most {MAX_TEMPLATE_BYTES})",
                self.source.len()
            )));
        }
        let mut env = Environment::new();
        env.set_fuel(Some(FUEL));
        env.set_recursion_limit(RECURSION_LIMIT);
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build().map_err(bad)?,
        );
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> std::result::Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template("chat", &self.source).map_err(bad)?;
        let ctx = context! {
            messages => messages
                .iter()
                .map(|m| Value::from_pairs([("role", m.role.as_str()), ("content", m.content.as_str())]))
                .collect::<Vec<_>>(),
            add_generation_prompt => add_generation_prompt,
            bos_token => &self.bos_token,
            eos_token => &self.eos_token,
        };
        let mut text = env.get_template("chat").and_then(|t| t.render(ctx)).map_err(bad)?;
        if self.add_bos && !self.bos_token.is_empty() && text.starts_with(&self.bos_token) {
            text.drain(..self.bos_token.len());
        }
        if self.add_eos && !self.eos_token.is_empty() && text.ends_with(&self.eos_token) {
            text.truncate(text.len() - self.eos_token.len());
        }
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(s: &str) -> Vec<Message> {
        vec![Message::new("user", s)]
    }

    /// SmolLM2's GGUF template (ChatML with a default system message), rendered by Python's
    /// jinja2 with transformers' settings:
    /// `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`.
    #[test]
    fn smollm2_template_as_jinja2_renders_it() {
        const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
        let t = ChatTemplate::new(Some(SMOLLM2), "<|im_start|>", "<|im_end|>", false, false);
        assert_eq!(
            t.apply(&user("Hi"), true).unwrap(),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let conv = [Message::new("system", "S"), Message::new("user", "Hi")];
        assert_eq!(t.apply(&conv, false).unwrap(), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    }

    #[test]
    fn chatml_fallback() {
        let t = ChatTemplate::new(None, "", "", false, false);
        assert!(!t.is_from_file());
        assert_eq!(t.apply(&user("Hi"), true).unwrap(), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    }

    #[test]
    fn bos_written_by_the_template_is_cut_when_the_tokenizer_adds_it() {
        let src =
            "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content | trim }}{% endfor %}{{ eos_token }}";
        let t = ChatTemplate::new(Some(src), "<s>", "</s>", true, false);
        assert_eq!(t.apply(&user("  x "), true).unwrap(), "[user]x</s>");
        let t = ChatTemplate::new(Some(src), "<s>", "</s>", false, true);
        assert_eq!(t.apply(&user("x"), true).unwrap(), "<s>[user]x");
    }

    #[test]
    fn python_string_methods_and_raise_exception() {
        let src = "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('bad role ' + m.role) }}{% endif %}{{ m.content.strip().upper() }}{% if m.content.startswith(' a') %}!{% endif %}{% endfor %}";
        let t = ChatTemplate::new(Some(src), "", "", false, false);
        assert_eq!(t.apply(&user(" abc "), true).unwrap(), "ABC!");
        let e = t.apply(&[Message::new("tool", "x")], true).unwrap_err().to_string();
        assert!(e.contains("bad role tool"), "{e}");
        let e = ChatTemplate::new(Some("{% for %}"), "", "", false, false).apply(&user("x"), true).unwrap_err();
        assert!(matches!(e, ModelError::Unsupported(_)), "{e}");
    }

    /// Hostile templates: each stops with an error, quickly, without taking memory. Not here:
    /// two constructs minijinja 3.1.0's fuel does not bound (README, "Not supported yet"):
    /// printing a sequence built by repeated `l + l` (`{{ l }}`: ~2^24 items formatted
    /// unmetered), and more than ~32 such concatenations stored through a `namespace`.
    #[test]
    fn hostile_templates_are_bounded() {
        let attacks = [
            // Endless work: 10^12 iterations.
            "{% for a in range(1000000) %}{% for b in range(1000000) %}{% endfor %}{% endfor %}",
            // Output growth: 10^8 bytes, doubling a string.
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
            // One huge allocation.
            "{{ 'x' * 1000000000 }}",
            // Unbounded recursion.
            "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            // Deep nesting.
            &"{% if true %}".repeat(5000),
            // A list grown by joining lists, walked.
            "{% set ns = namespace(l=[1]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{% for x in ns.l %}{% endfor %}",
        ];
        for src in attacks {
            let t0 = std::time::Instant::now();
            let r = ChatTemplate::new(Some(src), "", "", false, false).apply(&user("x"), true);
            assert!(r.is_err(), "{}: {:?}", &src[..src.len().min(80)], r.map(|s| s.len()));
            assert!(t0.elapsed().as_secs_f64() < 5.0, "{}: {:?}", &src[..src.len().min(80)], t0.elapsed());
        }
        let huge = "x".repeat(MAX_TEMPLATE_BYTES + 1);
        assert!(ChatTemplate::new(Some(&huge), "", "", false, false).apply(&user("x"), true).is_err());
        // A long conversation through a real template stays inside the budget.
        let conv: Vec<Message> = (0..200)
            .map(|i| Message::new(if i % 2 == 0 { "user" } else { "assistant" }, &"word ".repeat(100)))
            .collect();
        assert!(ChatTemplate::new(None, "", "", false, false).apply(&conv, true).is_ok());
    }
}
