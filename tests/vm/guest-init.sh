#!/bin/busybox sh
# shellcheck shell=dash disable=SC1091  # (busybox ash; /job.sh is written per run)
# guest-init.sh — the init of the VM lane's initramfs (built by run-in-vm.sh; see README.md).
#
# Stage 1, as /init (PID 1 in the initramfs): load the 9p and overlay modules, mount the host's
# / (read-only 9p, tag "hostroot") under a tmpfs-backed overlay, mount proc, sys, cgroup2, dev,
# tmp, run and the writable 9p shares into it, then switch_root into it and run stage 2.
# Stage 2, as "guest-init.sh stage2" (PID 1 in the overlay): run the command with its cwd and
# environment, print its exit status in a marker line, power off. With VM_SYSTEMD=1
# (run-in-vm.sh --systemd), stage 1 switches to /lib/systemd/systemd as PID 1 instead, and
# stage 2 runs as the oneshot service nodewarden-vm-job.service, its output on the console.
#
# /job.sh (appended to the initramfs by run-in-vm.sh for each run) sets VM_NONCE, VM_DEBUG,
# VM_SYSTEMD, VM_WORKDIR, VM_SHARES and VM_SHARE_<i> and defines vm_run (execs the command under env -i).
# Markers on the console, read by the host: @@VM-START-<nonce>@@ before the command,
# @@VM-EXIT-<nonce>@@ <status> after it, @@VM-FAIL-<nonce>@@ <reason> if the guest cannot run it.
# Everything before START goes to the host's boot log (shown with VM_DEBUG=1 or on failure).

MSIZE=512000

fail() {
  echo "@@VM-FAIL-${VM_NONCE:-}@@ $*"
  if [ "${VM_DEBUG:-0}" = 1 ]; then dmesg | tail -n 30; fi
  poweroff -f
  sleep 10
}

# --systemd: units in the overlay's /etc (lost at power-off) so that systemd, as PID 1, boots
# straight to one oneshot service that runs stage 2 (the command, the markers, the power-off)
# on the console. What the host's image enables but a test VM must not start (timers that
# run apt or man-db, time sync, gettys, the image's own daemons) is left out by booting a
# target of our own, or masked; the default dependencies (sysinit.target, basic.target,
# journald) stay. The image's /.dockerenv is removed (systemd would take the VM for a container). policy-rc.d is the image's own file: it is moved aside so that package
# maintainer scripts may start services, as on a real machine.
systemd_units() {
  u=$1/etc/systemd/system
  mkdir -p "$u"
  cat >"$u/nodewarden-vm.target" <<'UNIT'
[Unit]
Description=run-in-vm.sh: boot to the command
Wants=nodewarden-vm-job.service
UNIT
  cat >"$u/nodewarden-vm-job.service" <<'UNIT'
[Unit]
Description=run-in-vm.sh: the command
# stage 2 powers off itself; these only act if it fails before it can.
SuccessAction=poweroff-force
FailureAction=poweroff-force
[Service]
Type=oneshot
ExecStart=/run/nodewarden-vm/busybox sh /run/nodewarden-vm/init stage2
StandardInput=null
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
TTYReset=no
TTYVHangup=no
TimeoutStartSec=infinity
UNIT
  for m in timers.target systemd-timesyncd.service getty.target serial-getty@ttyS0.service \
           console-getty.service systemd-udev-trigger.service systemd-udev-settle.service \
           e2scrub_reap.service systemd-pstore.service systemd-firstboot.service \
           systemd-update-utmp.service systemd-update-utmp-runlevel.service; do
    ln -sf /dev/null "$u/$m"
  done
  # Generators: none is needed (no fstab, no block devices, no SysV scripts to run), and under
  # TCG they cost seconds.
  mkdir -p "$1/etc/systemd/system-generators"
  for g in "$1"/lib/systemd/system-generators/*; do
    ln -sf /dev/null "$1/etc/systemd/system-generators/${g##*/}"
  done
  # The image's /.dockerenv would make systemd believe it runs in a container (and ignore
  # the kernel command line).
  rm -f "$1/.dockerenv"
  if [ -e "$1/usr/sbin/policy-rc.d" ]; then mv "$1/usr/sbin/policy-rc.d" "$1/usr/sbin/policy-rc.d.vm-disabled"; fi
}

stage1() {
  BB=/bin/busybox
  $BB mount -t devtmpfs -o mode=0755 devtmpfs /dev 2>/dev/null
  exec </dev/console >/dev/console 2>&1
  $BB --install -s /bin
  export PATH=/bin
  [ -f /job.sh ] || fail "no /job.sh in the initramfs"
  . /job.sh
  [ "$VM_DEBUG" = 1 ] && set -x
  mount -t proc proc /proc || fail "mount /proc"
  mount -t sysfs sysfs /sys || fail "mount /sys"
  [ "$VM_DEBUG" = 1 ] || dmesg -n 1
  stty -F /dev/console -onlcr -echo 2>/dev/null

  while read -r ko; do
    insmod "/lib/modules/$ko" || fail "insmod $ko failed (see VM_DEBUG=1)"
  done </lib/modules/order

  mkdir -p /lower /rw /newroot
  mount -t 9p -o "ro,trans=virtio,version=9p2000.L,msize=$MSIZE,cache=loose" hostroot /lower ||
    fail "cannot mount the host's / over virtio-9p (tag hostroot)"
  mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount the overlay's tmpfs"
  mkdir -p /rw/upper /rw/work
  mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
    fail "cannot mount an overlay on the host's / (see VM_DEBUG=1)"

  R=/newroot
  mount --move /dev $R/dev || fail "move /dev"
  mount --move /proc $R/proc || fail "move /proc"
  mount --move /sys $R/sys || fail "move /sys"
  mkdir -p $R/dev/pts $R/dev/shm
  mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts $R/dev/pts || fail "mount /dev/pts"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $R/dev/shm || fail "mount /dev/shm"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs $R/tmp || fail "mount /tmp"
  mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs $R/run || fail "mount /run"

  # Pure cgroup v2 (the kernel runs with cgroup_no_v1=all), mounted as systemd mounts it.
  mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 $R/sys/fs/cgroup ||
    mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate cgroup2 $R/sys/fs/cgroup ||
    fail "cannot mount cgroup2 at /sys/fs/cgroup"
  # shellcheck disable=SC2013  # controller names, one a word
  for c in $(cat $R/sys/fs/cgroup/cgroup.controllers); do
    echo "+$c" >$R/sys/fs/cgroup/cgroup.subtree_control || echo "vm: cannot enable the $c controller"
  done
  [ -e $R/proc/pressure/memory ] || fail "no /proc/pressure/memory in the guest (PSI disabled?)"

  i=0 dir=
  while [ "$i" -lt "$VM_SHARES" ]; do
    eval "dir=\$VM_SHARE_$i"
    mkdir -p "$R$dir" || fail "cannot create the mount point $dir for a writable share"
    mount -t 9p -o "trans=virtio,version=9p2000.L,msize=$MSIZE,cache=mmap" "w$i" "$R$dir" ||
      fail "cannot mount the writable share $dir (tag w$i)"
    i=$((i + 1))
  done

  mkdir -p $R/run/nodewarden-vm
  cp /bin/busybox /init /job.sh $R/run/nodewarden-vm/ || fail "copy the stage 2 files"
  if [ "${VM_SYSTEMD:-0}" = 1 ]; then
    [ -x $R/lib/systemd/systemd ] || fail "no /lib/systemd/systemd on the host (install the Debian package systemd)"
    systemd_units $R
    # systemd finds /dev, /proc, /sys, cgroup2 and /run mounted and keeps them; the kernel
    # command line (run-in-vm.sh) names the target to boot, nodewarden-vm.target.
    # shellcheck disable=SC2093
    exec switch_root $R /lib/systemd/systemd
    fail "switch_root to systemd failed"
  fi
  # shellcheck disable=SC2093  # fail runs only if the exec does not happen
  exec switch_root $R /run/nodewarden-vm/busybox sh /run/nodewarden-vm/init stage2
  fail "switch_root failed"
}

stage2() {
  D=/run/nodewarden-vm
  BB=$D/busybox
  mkdir -p $D/bin
  $BB --install -s $D/bin
  export PATH=$D/bin
  . $D/job.sh
  [ "$VM_DEBUG" = 1 ] && set -x
  hostname nodewarden-vm
  ip link set lo up || fail "cannot bring up the loopback interface"
  cd "$VM_WORKDIR" || fail "the working directory $VM_WORKDIR does not exist in the guest"
  set +x
  echo "@@VM-START-$VM_NONCE@@"
  # The command's stdout and stderr are a pipe, not the serial tty (as under CI: no colours, no
  # progress bars), merged in the order written. It runs as a background job so that ash does
  # not print "Killed" and the like into its output. This PID 1 waits for the pipeline with
  # waitpid(-1), so orphans reparented to it are reaped while the command runs.
  { vm_run </dev/null 2>&1 & wait $!; echo "$?" >$D/rc; } 2>/dev/null | cat
  rc=$(cat $D/rc 2>/dev/null || echo 125)
  sync
  printf '\n@@VM-EXIT-%s@@ %s\n' "$VM_NONCE" "$rc"
  poweroff -f
  sleep 10
}

if [ "${1:-}" = stage2 ]; then stage2; else stage1; fi
