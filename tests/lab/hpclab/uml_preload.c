/*
 * LD_PRELOAD library for Debian's user-mode Linux 6.1 (package user-mode-linux), loaded into the `linux`
 * process of every lab guest. It fixes two faults of that kernel on today's hosts.
 *
 * 1. Vector state on hosts whose XSAVE area is larger than UML's buffer (CPUs with AMX).
 *    UML saves a guest thread's FPU/vector state with PTRACE_GETREGSET(NT_X86_XSTATE) into a fixed buffer
 *    (2696 bytes: x87, SSE, AVX, AVX-512, PKRU) and writes it back with PTRACE_SETREGSET. The host kernel
 *    accepts such a write only with its own full XSAVE size, which AMX makes ~11 KiB, so every guest dies
 *    at its first context switch ("userspace - ptrace set fp regs failed, errno = 14", then a panic).
 *    The wrapper below completes a short write: it reads the tracee's whole state, lays UML's bytes over its
 *    start (the header included, so the components UML knows are exactly UML's) and writes the whole buffer.
 *    The parts beyond UML's buffer (AMX tiles, which no guest enables) keep the tracee's own values. A host
 *    whose kernel accepts UML's short write never takes this path.
 *
 * 2. Reboot. A rebooting UML guest exec()s its own binary again, and the tap's /dev/net/tun descriptor (and
 *    a few others) survive the exec because UML opens them without O_CLOEXEC. The new kernel then cannot
 *    attach to the still-busy tap ("uml_tap: failed to create tun interface") and comes back without a
 *    network. The constructor below closes every inherited descriptor above stderr, so each boot starts
 *    like the first one (the lab starts `linux` with only stdin, stdout and stderr open).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Larger than any x86 XSAVE area so far (AMX: 11008 bytes). */
#define XSTATE_BUFFER_BYTES 32768

__attribute__((constructor)) static void close_inherited_descriptors(void)
{
    close_range(3, ~0U, 0);
}

typedef long (*ptrace_function)(enum __ptrace_request, ...);

/* UML issues ptrace from one thread (its kernel is single-CPU), so one static buffer serves every call;
 * a stack buffer this size would overflow UML's small kernel stacks. */
static unsigned char whole_state[XSTATE_BUFFER_BYTES] __attribute__((aligned(64)));
static int short_write_refused;

static ptrace_function real_ptrace(void)
{
    static ptrace_function function;
    if (function == NULL)
        function = (ptrace_function)dlsym(RTLD_NEXT, "ptrace");
    return function;
}

static long set_whole_xstate(pid_t pid, const struct iovec *partial)
{
    struct iovec whole = {whole_state, sizeof whole_state};
    if (real_ptrace()(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &whole) != 0)
        return -1;
    if (partial->iov_len > whole.iov_len) {
        errno = EFAULT;
        return -1;
    }
    memcpy(whole_state, partial->iov_base, partial->iov_len);
    return real_ptrace()(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, &whole);
}

long ptrace(enum __ptrace_request request, ...)
{
    va_list arguments;
    va_start(arguments, request);
    pid_t pid = va_arg(arguments, pid_t);
    void *address = va_arg(arguments, void *);
    void *data = va_arg(arguments, void *);
    va_end(arguments);

    if (request == PTRACE_SETREGSET && (long)address == NT_X86_XSTATE && data != NULL) {
        if (!short_write_refused) {
            long result = real_ptrace()(request, pid, address, data);
            if (result == 0 || errno != EFAULT)
                return result;
            short_write_refused = 1;
        }
        return set_whole_xstate(pid, (const struct iovec *)data);
    }
    return real_ptrace()(request, pid, address, data);
}
