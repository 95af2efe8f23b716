//! Loading the configuration: the command line (a clap command built from the settings table)
//! over the TOML file it names (`--config FILE`) over the defaults.
//!
//! Every value, whatever its source, goes through its setting's one parser; flags win over the
//! file wherever they appear on the command line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command};

use super::table::{lookup, DefaultValue, SETTINGS};
use super::{Config, ConfigError};

/// The clap command: `--config` and one flag per setting.
pub(super) fn command() -> Command {
    let mut cmd = Command::new("cairn-server")
        .version(super::VERSION)
        .about("cairn: a multi-threaded in-memory cache server speaking RESP (Redis) and memcached")
        .args_override_self(true)
        .arg(
            Arg::new("config")
                .long("config")
                .visible_alias("config-file")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help(
                    "TOML configuration file (keys are the setting names); flags override it, \
                     CONFIG REWRITE writes it.",
                ),
        );
    for setting in SETTINGS {
        let mut help = format!("{} [default: {}]", setting.help, setting.default_doc());
        if setting.mutable() {
            help.push_str(" [CONFIG SET can change it]");
        }
        let check = move |text: &str| -> Result<String, String> {
            (setting.parse)(&mut Config::blank(), text).map(|()| text.to_string())
        };
        let aliases = super::table::ALIASES
            .iter()
            .filter(|(_, name)| *name == setting.name)
            .map(|(alias, _)| *alias);
        cmd = cmd.arg(
            Arg::new(setting.name)
                .long(setting.name)
                .aliases(aliases)
                .value_name(setting.value_name)
                .help(help)
                .action(ArgAction::Set)
                .allow_negative_numbers(true)
                .value_parser(check),
        );
    }
    cmd
}

/// Parses `args` (the first item is the program name) and the file they name.
pub(super) fn from_args(argv: Vec<OsString>) -> Result<Config, ConfigError> {
    let matches = command()
        .try_get_matches_from(&argv)
        .map_err(ConfigError::Args)?;
    let file = matches.get_one::<PathBuf>("config").cloned();
    let (file_values, mappings) = match &file {
        Some(path) => read_file(path)?,
        None => (Vec::new(), Vec::new()),
    };
    let mut config = Config::defaults();
    config.config_file = file;
    config.writeback = mappings;
    // Table order, so that a shorthand applies after the setting it is part of; for each
    // setting the file first, then the flag.
    for setting in SETTINGS {
        let from_file = file_values
            .iter()
            .filter(|(name, _)| *name == setting.name)
            .map(|(_, v)| v.as_str());
        let from_flag = matches.get_one::<String>(setting.name).map(String::as_str);
        for text in from_file.chain(from_flag) {
            // Both were checked already (the flag by clap, the file by read_file).
            (setting.parse)(&mut config, text).map_err(ConfigError::File)?;
            // Given explicitly, the memcached port listens even with requirepass set.
            if setting.name == "memcache-port" {
                config.memcache_port_explicit = true;
            }
            // Given explicitly, the snapshot directory turns the save at shutdown on.
            if setting.name == "dir" {
                config.persist.dir_explicit = true;
            }
        }
    }
    Ok(config)
}

/// The file's settings and its `[[writeback]]` mappings.
type FileValues = (Vec<(&'static str, String)>, Vec<writeback::MappingConfig>);

/// Reads the TOML file into `(setting name, text)` pairs, each checked by its setting's
/// parser, so that its errors name the file and the key; and its write-behind mappings.
pub(super) fn read_file(path: &Path) -> Result<FileValues, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::File(format!("cannot read config file {}: {e}", path.display()))
    })?;
    parse_file(&text).map_err(|e| ConfigError::File(format!("config file {}: {e}", path.display())))
}

/// The TOML text's `(setting name, text)` pairs and its mappings. Keys are setting names,
/// with dashes or underscores; values are strings, integers or booleans. The one array of
/// tables, `[[writeback]]`, holds write-behind mappings (`writeback::MappingConfig`).
pub(super) fn parse_file(text: &str) -> Result<FileValues, String> {
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().trim().to_string())?;
    let mappings = match table.remove("writeback") {
        None => Vec::new(),
        Some(toml::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| mapping(i, item))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("'writeback' must be an array of tables ([[writeback]])".into()),
    };
    let mut out = Vec::with_capacity(table.len());
    for (key, value) in table {
        let setting = lookup(&key.replace('_', "-")).ok_or_else(|| {
            format!("unknown key '{key}' (the keys are the setting names, see --help)")
        })?;
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!(
                    "key '{key}': expected a string or an integer, got {}",
                    other.type_str()
                ))
            }
        };
        (setting.parse)(&mut Config::blank(), &text).map_err(|e| format!("key '{key}': {e}"))?;
        if out.iter().any(|(name, _)| *name == setting.name) {
            return Err(format!("key '{key}': {} is set twice", setting.name));
        }
        out.push((setting.name, text));
    }
    Ok((out, mappings))
}

/// One `[[writeback]]` table (the `i`th) as a mapping.
fn mapping(i: usize, item: &toml::Value) -> Result<writeback::MappingConfig, String> {
    let here = || format!("[[writeback]] #{}", i + 1);
    let toml::Value::Table(t) = item else {
        return Err(format!("{}: expected a table", here()));
    };
    let mut pairs = Vec::new();
    for (k, v) in t {
        let text = match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(format!("{}: key '{k}': got {}", here(), other.type_str()));
            }
        };
        pairs.push((k.clone(), text));
    }
    let name = t
        .get("name")
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("{}: needs a name", here()))?;
    writeback::MappingConfig::from_pairs(name, &pairs).map_err(|e| format!("{}: {e}", here()))
}

/// A config with every setting at its default.
pub(super) fn defaults() -> Config {
    let mut config = Config::blank();
    for setting in SETTINGS {
        if let DefaultValue::PartOf(_) = setting.default {
            continue;
        }
        if let Some(text) = setting.default_text() {
            // The table's defaults parse: a unit test checks every one.
            let parsed = (setting.parse)(&mut config, &text);
            debug_assert!(parsed.is_ok(), "default of {}: {parsed:?}", setting.name);
        }
    }
    config
}
