#!powershell

# Copyright: hpc.balance contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# Reports what the NetLbfo, NetAdapter and Hyper-V cmdlets say about this host, as plain records.
# It decides nothing and changes nothing: hpc.balance.win_nic_team makes every decision on the controller.

#AnsibleRequires -CSharpUtil Ansible.Basic

$spec = @{
    options = @{
        driver_file_patterns = @{ type = 'list'; elements = 'str'; default = @() }
    }
    supports_check_mode = $true
}
$module = [Ansible.Basic.AnsibleModule]::Create($args, $spec)
$driverFilePatterns = @($module.Params.driver_file_patterns)

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

Function Test-Command {
    param(
        [Parameter(Mandatory = $true)] [string] $Name
    )

    $null -ne (Get-Command -Name $Name -ErrorAction SilentlyContinue)
}

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

$module.Result.lbfo_available = Test-Command -Name 'Get-NetLbfoTeam'
$module.Result.teams = @()
$module.Result.team_members = @()
$module.Result.team_nics = @()
if ($module.Result.lbfo_available) {
    $module.Result.teams = @(Get-NetLbfoTeam | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $teamProperties })
    $module.Result.team_members = @(
        Get-NetLbfoTeamMember | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $memberProperties }
    )
    $module.Result.team_nics = @(
        Get-NetLbfoTeamNic | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $teamNicProperties }
    )
}

$module.Result.adapters = @(
    Get-NetAdapter -IncludeHidden | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $adapterProperties }
)
$module.Result.hardware_info = @(
    Get-NetAdapterHardwareInfo -ErrorAction SilentlyContinue |
        ForEach-Object { ConvertTo-Record -InputObject $_ -Property $hardwareProperties }
)

$vmms = Get-Service -Name 'vmms' -ErrorAction SilentlyContinue
$module.Result.hyperv_present = ($null -ne $vmms) -and (Test-Command -Name 'Get-VMSwitch')
$module.Result.vm_switches = @()
$module.Result.vm_switch_teams = @()
if ($module.Result.hyperv_present) {
    $switches = @(Get-VMSwitch)
    $module.Result.vm_switches = @($switches | ForEach-Object { ConvertTo-Record -InputObject $_ -Property $switchProperties })
    $module.Result.vm_switch_teams = @(
        $switches | Where-Object { $_.EmbeddedTeamingEnabled } | ForEach-Object {
            ConvertTo-Record -InputObject (Get-VMSwitchTeam -Name $_.Name) -Property $switchTeamProperties
        }
    )
}

$module.Result.teaming_drivers = @(
    Get-CimInstance -ClassName Win32_SystemDriver | Where-Object {
        $fileName = Split-Path -Path ([string]$_.PathName) -Leaf
        $matched = $false
        foreach ($pattern in $driverFilePatterns) {
            if ($fileName -like $pattern) {
                $matched = $true
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
