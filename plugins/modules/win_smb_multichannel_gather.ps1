#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Reports the SMB Multichannel state of this host as plain records: server and client switches, constraints,
# live multichannel connections, the client and server interfaces SMB sees, RSS and RDMA per adapter, and LBFO team
# membership. It decides nothing. With a share it opens it and lets the channels settle within this one logon.

#AnsibleRequires -CSharpUtil Ansible.Basic
#AnsibleRequires -PowerShell ansible_collections.hpc.balance.plugins.module_utils.HpcWin

$spec = @{
    options = @{
        share = @{ type = 'str' }
        min_channels = @{ type = 'int'; default = 2 }
        settle_s = @{ type = 'int'; default = 10 }
    }
    supports_check_mode = $true
}
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)
$share = $module.Params.share

$connectionProperties = @(
    'ServerName', 'Selected', 'ClientInterfaceIndex', 'ClientInterfaceFriendlyName', 'ClientIpAddress',
    'ServerInterfaceIndex', 'ServerIpAddress', 'ClientRSSCapable', 'ClientRdmaCapable', 'ServerRSSCapable',
    'ServerRdmaCapable', 'ClientLinkSpeed', 'ServerLinkSpeed', 'CurrentChannels', 'MaxChannels', 'Failed',
    'FailureCount', 'SmbInstance'
)
$interfaceProperties = @('InterfaceIndex', 'FriendlyName', 'RssCapable', 'RdmaCapable', 'LinkSpeed', 'IpAddresses')
$serverInterfaceProperties = @('InterfaceIndex', 'FriendlyName', 'RssCapable', 'RdmaCapable', 'LinkSpeed', 'IpAddress')
$rssProperties = @(
    'Name', 'InterfaceDescription', 'Enabled', 'NumberOfReceiveQueues', 'MaxProcessors', 'BaseProcessorNumber', 'Profile'
)

$module.Result.server_configuration = ConvertTo-Record -InputObject (Get-SmbServerConfiguration) -Property @(
    'EnableMultiChannel', 'EnableSMB2Protocol', 'EnableSMB1Protocol'
)
$module.Result.client_configuration = ConvertTo-Record -InputObject (Get-SmbClientConfiguration) -Property @(
    'EnableMultiChannel'
)
$module.Result.constraints = Get-Record -Command 'Get-SmbMultichannelConstraint' -Property @(
    'ServerName', 'InterfaceAlias', 'InterfaceIndex', 'InterfaceGuid'
)

# Opening the share sets up the SMB session whose channels are then listed. Channels are added a moment after the
# session: wait for them here, in this logon (each module run is a fresh logon and a fresh session).
$module.Result.share_probe = @{}
if ($share) {
    $probe = @{ path = $share; reachable = $false; error = $null; settled_s = 0 }
    try {
        $probe.reachable = Test-Path -LiteralPath $share -ErrorAction Stop
    }
    catch {
        $probe.error = $_.Exception.Message
    }
    $server = ($share -replace '^[\\/]+', '') -split '[\\/]' | Select-Object -First 1
    $started = Get-Date
    while ($probe.reachable -and ((Get-Date) - $started).TotalSeconds -lt $module.Params.settle_s) {
        $channels = (Get-SmbMultichannelConnection -ServerName $server -ErrorAction SilentlyContinue |
            Where-Object { $_.Selected -and -not $_.Failed } | Measure-Object -Property CurrentChannels -Sum).Sum
        if ($channels -ge $module.Params.min_channels) {
            break
        }
        Start-Sleep -Seconds 1
    }
    $probe.settled_s = [int]((Get-Date) - $started).TotalSeconds
    $module.Result.share_probe = $probe
}

$module.Result.connections = Get-Record -Command 'Get-SmbMultichannelConnection' -Property $connectionProperties -Parameters @{
    IncludeNotSelected = $true
}
$module.Result.client_interfaces = Get-Record -Command 'Get-SmbClientNetworkInterface' -Property $interfaceProperties
$module.Result.server_interfaces = Get-Record -Command 'Get-SmbServerNetworkInterface' -Property $serverInterfaceProperties
$module.Result.rss = Get-Record -Command 'Get-NetAdapterRss' -Property $rssProperties -Parameters @{
    ErrorAction = 'SilentlyContinue'
}
$module.Result.rdma = Get-Record -Command 'Get-NetAdapterRdma' -Property @('Name', 'InterfaceDescription', 'Enabled') -Parameters @{
    ErrorAction = 'SilentlyContinue'
}
$module.Result.adapters = Get-Record -Command 'Get-NetAdapter' -Property @('Name', 'InterfaceDescription', 'InterfaceIndex', 'Status')
$module.Result.team_members = Get-Record -Command 'Get-NetLbfoTeamMember' -Property @('Name', 'Team')

$module.ExitJson()
