//! Where the CLI finds the server and its token: flags, environment, the config file.

use anyhow::anyhow;
use clap::Args;
use fairsched_api::client::ApiClient;
use std::path::PathBuf;

/// How the CLI reaches the server. Each setting comes from its flag, else its environment
/// variable, else the config file (`FAIRSCHED_CONFIG`, else
/// `$XDG_CONFIG_HOME/fairsched/config.toml` or `~/.config/fairsched/config.toml`).
#[derive(Debug, Args)]
pub struct Conn {
    /// Server URL, or several separated by commas (a cluster's servers: requests go to the
    /// one that leads) [default: `server` in the config file, else http://127.0.0.1:9090].
    #[arg(long, env = "FAIRSCHED_SERVER", global = true)]
    server: Option<String>,
    /// API token, sent as `Authorization: Bearer` [default: `token` in the config file].
    #[arg(long, env = "FAIRSCHED_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    /// Print JSON.
    #[arg(long, global = true)]
    pub(super) json: bool,
}

/// The server URL when neither a flag, the environment nor the config file gives one.
const DEFAULT_SERVER: &str = "http://127.0.0.1:9090";

/// The CLI's config file: `server = "http://..."`, `token = "..."`.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    server: Option<String>,
    token: Option<String>,
}

/// Where the config file is: `FAIRSCHED_CONFIG` (which must exist), else the first of
/// `$XDG_CONFIG_HOME/fairsched/config.toml` and `$HOME/.config/fairsched/config.toml` (either
/// may be absent). `(path, required)`.
fn config_path(env: impl Fn(&str) -> Option<String>) -> Option<(PathBuf, bool)> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if let Some(p) = set("FAIRSCHED_CONFIG") {
        return Some((PathBuf::from(p), true));
    }
    let base = set("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| set("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some((base.join("fairsched").join("config.toml"), false))
}

fn read_config_file(path: &std::path::Path, required: bool) -> anyhow::Result<ConfigFile> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
            return Ok(ConfigFile::default());
        }
        Err(e) => {
            return Err(anyhow!(
                "cannot read the config file {} (FAIRSCHED_CONFIG): {e}",
                path.display()
            ));
        }
    };
    toml::from_str(&text).map_err(|e| anyhow!("config file {}: {e}", path.display()))
}

/// The server URL and token: flag, else environment (clap merged those two), else file, else
/// the default URL and no token.
fn resolve_conn(
    server: Option<String>,
    token: Option<String>,
    file: ConfigFile,
) -> (String, Option<String>) {
    (
        server
            .or(file.server)
            .unwrap_or_else(|| DEFAULT_SERVER.to_string()),
        token.or(file.token),
    )
}

impl Conn {
    /// A client of the server this invocation names.
    pub(super) fn client(&self) -> anyhow::Result<ApiClient> {
        let file = match config_path(|k| std::env::var(k).ok()) {
            Some((path, required)) => read_config_file(&path, required)?,
            None => ConfigFile::default(),
        };
        let (server, token) = resolve_conn(self.server.clone(), self.token.clone(), file);
        Ok(ApiClient::new(&server, token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn flag_or_env_beats_the_config_file_which_beats_the_default() {
        let f = || file("server = \"http://file:1\"\ntoken = \"file-token\"\n");
        // clap gives the flag, else the environment variable, as one value.
        assert_eq!(
            resolve_conn(Some("http://flag:2".into()), Some("t".into()), f()),
            ("http://flag:2".to_string(), Some("t".to_string()))
        );
        assert_eq!(
            resolve_conn(None, None, f()),
            ("http://file:1".to_string(), Some("file-token".to_string()))
        );
        assert_eq!(
            resolve_conn(None, None, ConfigFile::default()),
            (DEFAULT_SERVER.to_string(), None)
        );
        assert_eq!(
            resolve_conn(None, None, file("token = \"x\"")).0,
            DEFAULT_SERVER
        );
    }

    #[test]
    fn config_file_location() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            config_path(env(&[("FAIRSCHED_CONFIG", "/x.toml"), ("HOME", "/home/a")])),
            Some((PathBuf::from("/x.toml"), true))
        );
        assert_eq!(
            config_path(env(&[("XDG_CONFIG_HOME", "/cfg"), ("HOME", "/home/a")])),
            Some((PathBuf::from("/cfg/fairsched/config.toml"), false))
        );
        assert_eq!(
            config_path(env(&[("HOME", "/home/a")])),
            Some((
                PathBuf::from("/home/a/.config/fairsched/config.toml"),
                false
            ))
        );
        assert_eq!(config_path(env(&[])), None);
    }

    #[test]
    fn config_file_errors_name_the_file_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        // An absent default file is no error; an absent FAIRSCHED_CONFIG is.
        assert_eq!(
            read_config_file(&path, false).unwrap(),
            ConfigFile::default()
        );
        let err = read_config_file(&path, true).unwrap_err().to_string();
        assert!(
            err.contains("config.toml") && err.contains("FAIRSCHED_CONFIG"),
            "{err}"
        );
        std::fs::write(&path, "servr = \"http://x\"\n").unwrap();
        let err = read_config_file(&path, false).unwrap_err().to_string();
        assert!(
            err.contains("config.toml") && err.contains("servr"),
            "{err}"
        );
    }
}
