#include "nz-heap.h"

#include <malloc.h>

void
nz_heap_keep_transfer_buffers (void)
{
  static gsize done;

  if (g_once_init_enter (&done))
    {
      mallopt (M_MMAP_THRESHOLD, 2 << 20);
      mallopt (M_TRIM_THRESHOLD, 4 << 20);
      g_once_init_leave (&done, 1);
    }
}
