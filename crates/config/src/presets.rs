//! Applying `pool_config_presets` to pools.

use crate::error::{ConfigError, ConfigErrors};
use crate::pool::{PoolConfig, PoolNode};
use crate::tree::TreeConfig;
use crate::trees::PoolTreeConfig;
use std::collections::BTreeMap;

/// A pool's config with the presets it names applied.
///
/// Options the pool sets itself always win. Among presets, the **earlier** one in
/// `config_presets` wins: presets only fill what is still unset, in list order. This is
/// YTsaurus' observed behaviour (`[A (tolerance 0.6), B (tolerance 0.5, timeout 2000)]` gives
/// tolerance 0.6 and timeout 2000). Unknown preset names are errors naming the pool (`path`)
/// and the preset.
pub fn resolve_pool_config(
    tree: &TreeConfig,
    path: &str,
    config: &PoolConfig,
) -> Result<PoolConfig, Vec<ConfigError>> {
    let mut resolved = config.clone();
    let mut errors = Vec::new();
    for name in &config.config_presets {
        match tree.pool_config_presets.get(name) {
            Some(preset) => preset.fill_unset(&mut resolved),
            None => errors.push(ConfigError::pool(
                path,
                "config_presets",
                unknown_preset_message(name, &tree.pool_config_presets),
            )),
        }
    }
    if errors.is_empty() {
        Ok(resolved)
    } else {
        Err(errors)
    }
}

pub(crate) fn unknown_preset_message<T>(name: &str, presets: &BTreeMap<String, T>) -> String {
    if presets.is_empty() {
        format!("unknown preset {name:?}: the tree defines no pool_config_presets")
    } else {
        let known: Vec<String> = presets.keys().map(|k| format!("{k:?}")).collect();
        format!(
            "unknown preset {name:?}: the tree's pool_config_presets are {}",
            known.join(", ")
        )
    }
}

/// The tree with every pool's presets applied (see [`resolve_pool_config`]). The pools keep
/// their `config_presets` lists. All unknown presets of the tree are reported together.
pub fn resolve_presets(tree: &PoolTreeConfig) -> Result<PoolTreeConfig, ConfigErrors> {
    fn go(
        tree: &TreeConfig,
        prefix: &str,
        pools: &mut BTreeMap<String, PoolNode>,
        errors: &mut Vec<ConfigError>,
    ) {
        for (name, node) in pools.iter_mut() {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            match resolve_pool_config(tree, &path, &node.config()) {
                Ok(config) => node.set_config(config),
                Err(e) => errors.extend(e),
            }
            go(tree, &path, &mut node.pools, errors);
        }
    }
    let mut resolved = tree.clone();
    let mut errors = Vec::new();
    go(&tree.config, "", &mut resolved.pools, &mut errors);
    if errors.is_empty() {
        Ok(resolved)
    } else {
        Err(ConfigErrors(errors))
    }
}
