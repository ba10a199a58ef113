//! The reference of the server's file ([`ServerConfig`] with its `[scheduler]` block),
//! generated from the types like the pool-trees reference it links to
//! (`fairsched_config::reference`): `docs/server-config-reference.md`.

use crate::{AuthConfig, AuthUser, ServerConfig, StoreConfig, Synchronous};
use fairsched_config::reference::{
    Described, POOL_TREES_LINK, Page, Reference, SectionStyle, pool_trees_types,
};
use fairsched_core::SchedulerConfig;

/// The command that rewrites `docs/server-config-reference.md`.
pub const UPDATE_COMMAND: &str =
    "UPDATE_DOCS=1 cargo test -p fairsched-server --test config_reference";

const SECTIONS: &[SectionStyle] = &[
    SectionStyle {
        type_name: "ServerConfig",
        title: "Server file",
        placeholder: "name",
    },
    SectionStyle {
        type_name: "SchedulerConfig",
        title: "Scheduler",
        placeholder: "name",
    },
    SectionStyle {
        type_name: "AuthConfig",
        title: "Authentication",
        placeholder: "name",
    },
    SectionStyle {
        type_name: "AuthUser",
        title: "Users",
        placeholder: "user",
    },
    SectionStyle {
        type_name: "StoreConfig",
        title: "Store",
        placeholder: "name",
    },
];

/// The reference of `fairsched server --config FILE`. Its JSON schema is complete (inline
/// pool trees included); its page links the pool-tree options to the pool-trees reference.
pub fn server_config() -> Reference {
    let mut types = vec![
        Described::structure::<ServerConfig>(),
        Described::structure::<SchedulerConfig>(),
        Described::structure::<AuthConfig>(),
        Described::structure::<AuthUser>(),
        Described::structure::<StoreConfig>(),
        Described::enumeration::<Synchronous>(),
    ];
    types.extend(pool_trees_types());
    Reference::new::<ServerConfig>(
        "fairsched server configuration",
        "The file of `fairsched server --config FILE` (TOML): `fairsched_server::ServerConfig`.",
        types,
        Page {
            title: "Server configuration reference",
            source: "the configuration types in crates/server and crates/core",
            command: "fairsched config reference",
            update_command: UPDATE_COMMAND,
            intro: format!(
                "Every option of the server's file, `fairsched server --config fairsched.toml`: \
                 its name, type, default (what it is when left out) and documentation. The pool \
                 trees the server starts with (`pool_trees_file`, or inline `pool_trees`) have \
                 their own page, the [pool-trees reference](config-reference.md).\n\n\
                 This page is generated from the configuration types (`ServerConfig` in \
                 `crates/server`, `SchedulerConfig` in `crates/core`: their doc comments, serde \
                 names and `Default` impls); `fairsched config reference` prints it, and \
                 `fairsched config reference --format json-schema` prints the JSON schema it is \
                 rendered from (complete: it includes the inline pool trees). A test fails when \
                 the page and the code disagree; `{UPDATE_COMMAND}` rewrites it.\n\n\
                 Conventions:\n\n\
                 - The file is TOML. Every option may be left out; an unknown name is an error \
                 that names it and its line. Without `--config` the server runs with all the \
                 defaults.\n\
                 - Durations end in `_ms` and are in milliseconds.\n\
                 - *unset* is the default of an option that has no value unless you give one; \
                 its documentation says what that means."
            ),
            sections: SECTIONS,
            type_aliases: &[],
            linked: vec![POOL_TREES_LINK],
        },
    )
}
