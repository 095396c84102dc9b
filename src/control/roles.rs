//! `role …` and the dashboard's role changes: a tab's role, group and label.

use super::*;

/// `?<role …>!` for one tab (also the dashboard's role/group change): a role card wins, the
/// new role and group are kept and the tab gets a fresh `welcome`.
pub fn set_tab_role(
    control: &Control,
    client_id: &str,
    role: Role,
    group: Option<String>,
) -> Result<String, HostError> {
    let client = control
        .registry
        .get(client_id)
        .ok_or_else(|| HostError::UnknownTarget(client_id.to_string()))?;
    if let Some((card_role, _)) = control.commands.card_role(&client) {
        if card_role != role {
            return Err(HostError::Other(format!(
                "角色卡规定此标签页为 {} / a role card makes this tab {}; edit the card to change it",
                card_role.as_str(),
                card_role.as_str()
            )));
        }
    }
    client.update_info(|i| {
        i.role = role;
        if group.is_some() {
            i.group = group.clone();
        }
    });
    control.registry.persist(&client);
    let _ = control.registry.send(&client.id, &control.welcome(&client));
    let g = client
        .info()
        .group
        .map(|g| format!(", group {g}"))
        .unwrap_or_default();
    Ok(format!("角色已设为 / role set to {}{g}", role.as_str()))
}

pub(super) fn role_from_cmd(r: CmdRole) -> Role {
    match r {
        CmdRole::Master => Role::Master,
        CmdRole::Foreman => Role::Foreman,
        CmdRole::Worker => Role::Worker,
    }
}
