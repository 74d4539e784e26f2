#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Reports what the NetLbfo, NetAdapter, NetTCPIP, DnsClient and Hyper-V cmdlets say about this host, as plain
# records. It decides nothing and changes nothing: hpc.balance.win_nic_team makes every decision on the controller,
# including whether a change can cut the controller off (hence the IP configuration and the WinRM connections).

#AnsibleRequires -CSharpUtil Ansible.Basic
#AnsibleRequires -PowerShell ansible_collections.hpc.balance.plugins.module_utils.HpcWin

$spec = @{
    options = @{
        driver_file_patterns = @{ type = 'list'; elements = 'str'; default = @() }
        connection_ports = @{ type = 'list'; elements = 'int'; default = @(5985, 5986) }
    }
    supports_check_mode = $true
}
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)
$driverFilePatterns = @($module.Params.driver_file_patterns)
$connectionPorts = @($module.Params.connection_ports)

$teamProperties = @('Name', 'Members', 'TeamNics', 'TeamingMode', 'LoadBalancingAlgorithm', 'LacpTimer', 'Status')
$memberProperties = @(
    'Name', 'InterfaceDescription', 'Team', 'AdministrativeMode', 'OperationalStatus',
    'TransmitLinkSpeed', 'ReceiveLinkSpeed', 'FailureReason'
)
$teamNicProperties = @('Name', 'InterfaceDescription', 'Team', 'VlanID', 'Primary', 'Default')
$adapterProperties = @(
    'Name', 'InterfaceDescription', 'InterfaceIndex', 'Status', 'MediaConnectState', 'Speed',
    'ReceiveLinkSpeed', 'TransmitLinkSpeed', 'MacAddress', 'DriverProvider', 'DriverVersionString',
    'DriverDescription', 'DriverName', 'ComponentID', 'Virtual', 'Hidden', 'HardwareInterface'
)
$hardwareProperties = @(
    'Name', 'InterfaceDescription', 'SegmentNumber', 'BusNumber', 'DeviceNumber', 'FunctionNumber',
    'SlotNumber', 'NumaNode', 'PciExpressCurrentLinkSpeedEncoded', 'PciExpressCurrentLinkWidth',
    'PciExpressMaxLinkSpeedEncoded', 'PciExpressMaxLinkWidth', 'PciExpressVersion', 'LocationInformationString'
)
$switchProperties = @(
    'Name', 'SwitchType', 'NetAdapterInterfaceDescription', 'NetAdapterInterfaceDescriptions',
    'EmbeddedTeamingEnabled', 'AllowManagementOS'
)
$switchTeamProperties = @('Name', 'Id', 'NetAdapterInterfaceDescription', 'TeamingMode', 'LoadBalancingAlgorithm')
$driverProperties = @('Name', 'DisplayName', 'PathName', 'State', 'Started')
$ipv4 = @{ AddressFamily = 'IPv4' }

$module.Result.lbfo_available = Test-Command -Name 'Get-NetLbfoTeam'
$module.Result.teams = Get-Record -Command 'Get-NetLbfoTeam' -Property $teamProperties
$module.Result.team_members = Get-Record -Command 'Get-NetLbfoTeamMember' -Property $memberProperties
$module.Result.team_nics = Get-Record -Command 'Get-NetLbfoTeamNic' -Property $teamNicProperties
$module.Result.adapters = Get-Record -Command 'Get-NetAdapter' -Property $adapterProperties -Parameters @{
    IncludeHidden = $true
}
$module.Result.hardware_info = Get-Record -Command 'Get-NetAdapterHardwareInfo' -Property $hardwareProperties -Parameters @{
    ErrorAction = 'SilentlyContinue'
}
$module.Result.rdma = Get-Record -Command 'Get-NetAdapterRdma' -Property @('Name', 'InterfaceDescription', 'Enabled') -Parameters @{
    ErrorAction = 'SilentlyContinue'
}
# The jumbo packet size (standardized keyword *JumboPacket, frame bytes with the Ethernet header; 1514 is off):
# team members must carry one size. A driver without the keyword gives no record, and the size stays unknown.
$module.Result.jumbo_packets = Get-Record -Command 'Get-NetAdapterAdvancedProperty' -Property @(
    'Name', 'InterfaceDescription', 'RegistryKeyword', 'RegistryValue', 'DisplayValue'
) -Parameters @{ RegistryKeyword = '*JumboPacket'; ErrorAction = 'SilentlyContinue' }

# The IP configuration and the connections on the port Ansible uses (IPv4 and IPv6): what the controller
# reaches this host by.
$addressProperties = @(
    'InterfaceAlias', 'InterfaceIndex', 'IPAddress', 'PrefixLength', 'PrefixOrigin', 'AddressFamily', 'SkipAsSource'
)
$module.Result.ip_addresses = Get-Record -Command 'Get-NetIPAddress' -Parameters $ipv4 -Property $addressProperties
$module.Result.ipv6_addresses = Get-Record -Command 'Get-NetIPAddress' -Property $addressProperties -Parameters @{
    AddressFamily = 'IPv6'
}
$module.Result.ip_interfaces = Get-Record -Command 'Get-NetIPInterface' -Parameters $ipv4 -Property @(
    'InterfaceAlias', 'InterfaceIndex', 'AddressFamily', 'Dhcp', 'InterfaceMetric', 'AutomaticMetric'
)
# The default routes of both families: the rollback restores them, and a second default gateway is refused.
$module.Result.routes = Get-Record -Command 'Get-NetRoute' -Property @(
    'InterfaceAlias', 'DestinationPrefix', 'NextHop', 'RouteMetric'
) -Parameters @{
    DestinationPrefix = @('0.0.0.0/0', '::/0')
    ErrorAction = 'SilentlyContinue'
}
$module.Result.dns_servers = Get-Record -Command 'Get-DnsClientServerAddress' -Property @(
    'InterfaceAlias', 'AddressFamily', 'ServerAddresses'
)
$module.Result.dns_clients = Get-Record -Command 'Get-DnsClient' -Property @(
    'InterfaceAlias', 'RegisterThisConnectionsAddress'
)
$module.Result.winrm_connections = Get-Record -Command 'Get-NetTCPConnection' -Property @(
    'LocalAddress', 'LocalPort', 'RemoteAddress', 'State'
) -Parameters @{ LocalPort = $connectionPorts; State = 'Established'; ErrorAction = 'SilentlyContinue' }

$vmms = Get-Service -Name 'vmms' -ErrorAction SilentlyContinue
$module.Result.hyperv_present = ($null -ne $vmms) -and (Test-Command -Name 'Get-VMSwitch')
$module.Result.vm_switches = @()
$module.Result.vm_switch_teams = @()
$module.Result.host_vnics = @()
$module.Result.host_vnic_vlans = @()
$module.Result.vm_adapters = @()
if ($module.Result.hyperv_present) {
    $switches = @(Get-VMSwitch)
    $module.Result.vm_switches = @($switches | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $switchProperties })
    $module.Result.vm_switch_teams = @(
        $switches | Where-Object { $_.EmbeddedTeamingEnabled } | ForEach-Object {
            ConvertTo-Record -InputObject (Get-VMSwitchTeam -Name $_.Name) -Property $switchTeamProperties
        }
    )
    $managementOS = @{ ManagementOS = $true }
    $module.Result.host_vnics = Get-Record -Command 'Get-VMNetworkAdapter' -Parameters $managementOS -Property @(
        'Name', 'SwitchName', 'IsManagementOs'
    )
    $module.Result.host_vnic_vlans = @(
        Get-VMNetworkAdapterVlan -ManagementOS | ForEach-Object {
            @{ ParentAdapter = $_.ParentAdapter.Name; OperationMode = $_.OperationMode.ToString(); AccessVlanId = $_.AccessVlanId }
        }
    )
    # The virtual machines' adapters and the switch each is connected to: a switch with VMs is never removed.
    $module.Result.vm_adapters = Get-Record -Command 'Get-VMNetworkAdapter' -Parameters @{ VMName = '*' } -Property @(
        'VMName', 'Name', 'SwitchName'
    )
}

# A driver without a PathName (some kernel drivers report none) is skipped, not an error.
$module.Result.teaming_drivers = @(
    Get-CimInstance -ClassName Win32_SystemDriver | Where-Object {
        $path = [string]$_.PathName
        $matched = $false
        if ($path) {
            $fileName = [System.IO.Path]::GetFileName($path)
            foreach ($pattern in $driverFilePatterns) {
                if ($fileName -like $pattern) {
                    $matched = $true
                }
            }
        }
        $matched
    } | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $driverProperties }
)

$os = Get-CimInstance -ClassName Win32_OperatingSystem
$module.Result.os = @{
    caption = $os.Caption
    version = $os.Version
    build_number = [int]$os.BuildNumber
}

$module.ExitJson()
