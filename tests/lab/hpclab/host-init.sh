#!/bin/sh
# PID 1 of one lab host, started by lab.py inside the host's network namespace and a fresh
# UTS + mount + PID namespace. It gives the host its own name, /run, /tmp, home, /opt and
# copy-on-write /etc and /var/log, then becomes sshd, so killing this process ends the host.
#
# Usage: host-init.sh HOST_NAME HOST_DIR
#   HOST_DIR  the host's folder in the lab state dir (sshd_config, ssh/, upper/, work/, ...)
set -eu

host_name=$1
host_dir=$2

hostname "$host_name"

# The copied mount table holds every named network namespace of the machine (ip netns keeps them
# under /run/netns); drop them so this host does not keep other labs' namespaces alive.
if grep -q ' /run/netns ' /proc/self/mountinfo; then
    umount --recursive --lazy /run/netns
fi

# Private /run: sshd, keepalived and friends keep pid files and sockets there.
mount -t tmpfs -o mode=0755,size=64m lab-run /run
if [ ! -L /var/run ]; then
    mount -t tmpfs -o mode=0755,size=16m lab-var-run /var/run
fi
mkdir -p /run/sshd /run/lock
chmod 0755 /run/sshd

# Reach the host folder through a fixed path, so the mounts below may cover the folder
# that holds the state dir (a repository cloned under /root or /tmp) without losing it.
mkdir /run/lab-host
mount --bind "$host_dir" /run/lab-host
lab=/run/lab-host

# Copy-on-write views: the machine's files are visible, every write stays with this host.
for path in /etc /var/log; do
    mount -t overlay lab-overlay \
        -o "lowerdir=$path,upperdir=$lab/upper$path,workdir=$lab/work$path" "$path"
done

# Fresh per-host folders; /opt (software installed on the host, such as gpu1's venvs) is a tmpfs that ends with the
# host, so taking the lab down does not delete gigabytes from the disk. Its size is a ceiling, not an allocation: the
# gpu_moe preflight wants room for a venv (5 GiB) beside the one in use.
mount --bind "$lab/root" /root
mount -t tmpfs -o mode=0755,size=16g lab-opt /opt
mount --bind "$lab/var-tmp" /var/tmp
mount --bind "$lab/tmp" /tmp

exec /usr/sbin/sshd -D -e -f "$lab/sshd_config"
