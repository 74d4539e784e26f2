#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Reports the SMB Multichannel state of this host as plain records: server and client switches, constraints,
# live multichannel connections, the client interfaces SMB sees, and RSS per adapter. It decides nothing.

#AnsibleRequires -CSharpUtil Ansible.Basic

$spec = @{
    options = @{
        share = @{ type = 'str' }
    }
    supports_check_mode = $true
}
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)
$share = $module.Params.share

Function ConvertTo-Record {
    # One cmdlet output object -> hashtable of the named properties; .NET enums become their names.
    param(
        [Parameter(Mandatory = $true)] $InputObject,
        [Parameter(Mandatory = $true)] [string[]] $Property
    )

    $record = @{}
    foreach ($name in $Property) {
        $value = $InputObject.$name
        if ($value -is [System.Enum]) {
            $value = $value.ToString()
        }
        $record[$name] = $value
    }
    $record
}

$connectionProperties = @(
    'ServerName', 'Selected', 'ClientInterfaceIndex', 'ClientInterfaceFriendlyName', 'ClientIpAddress',
    'ServerInterfaceIndex', 'ServerIpAddress', 'ClientRSSCapable', 'ClientRdmaCapable', 'ServerRSSCapable',
    'ServerRdmaCapable', 'ClientLinkSpeed', 'ServerLinkSpeed', 'CurrentChannels', 'MaxChannels', 'Failed',
    'FailureCount', 'SmbInstance'
)
$interfaceProperties = @('InterfaceIndex', 'FriendlyName', 'RssCapable', 'RdmaCapable', 'LinkSpeed', 'IpAddresses')
$rssProperties = @(
    'Name', 'InterfaceDescription', 'Enabled', 'NumberOfReceiveQueues', 'MaxProcessors', 'BaseProcessorNumber', 'Profile'
)

$module.Result.server_configuration = ConvertTo-Record -InputObject (Get-SmbServerConfiguration) -Property @(
    'EnableMultiChannel', 'EnableSMB2Protocol', 'EnableSMB1Protocol'
)
$module.Result.client_configuration = ConvertTo-Record -InputObject (Get-SmbClientConfiguration) -Property @(
    'EnableMultiChannel'
)
$module.Result.constraints = @(
    Get-SmbMultichannelConstraint | ForEach-Object {
        ConvertTo-Record -InputObject $_ -Property @('ServerName', 'InterfaceAlias', 'InterfaceIndex', 'InterfaceGuid')
    }
)

# Opening the share sets up the SMB session whose channels are then listed.
$module.Result.share_probe = @{}
if ($share) {
    $probe = @{ path = $share; reachable = $false; error = $null }
    try {
        $probe.reachable = Test-Path -LiteralPath $share -ErrorAction Stop
    }
    catch {
        $probe.error = $_.Exception.Message
    }
    $module.Result.share_probe = $probe
}

$module.Result.connections = @(
    Get-SmbMultichannelConnection -IncludeNotSelected |
        ForEach-Object { ConvertTo-Record -InputObject $_ -Property $connectionProperties }
)
$module.Result.client_interfaces = @(
    Get-SmbClientNetworkInterface | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $interfaceProperties }
)
$module.Result.rss = @(
    Get-NetAdapterRss -ErrorAction SilentlyContinue |
        ForEach-Object { ConvertTo-Record -InputObject $_ -Property $rssProperties }
)
$module.Result.adapters = @(
    Get-NetAdapter | ForEach-Object { ConvertTo-Record -InputObject $_ -Property @('Name', 'InterfaceIndex', 'Status') }
)

$module.ExitJson()
