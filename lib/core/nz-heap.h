/* nz-heap.h: the allocator settings of the programs that move files. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Keeps freed buffers of up to 2 MiB on the heap instead of returning them to the kernel, so
 * the few 256-512 KiB buffers of each file part (frame, base64 text, decoded bytes) are
 * reused rather than mapped afresh, a page fault per page. glibc's defaults mmap anything
 * over 128 KiB and trim the heap top past 256 KiB (adjusted upwards as it goes), which made
 * page faults most of an upload's cost on a VM. Called first thing by namzu-cp, the agent and
 * the worker: it allocates nothing, so idle memory is unchanged, and with the buffers reused
 * an upload's peak is lower too (bench-files); after a transfer up to 4 MiB of free heap may
 * stay resident. Idempotent. */
void nz_heap_keep_transfer_buffers (void);

G_END_DECLS
