/* Unit tests of the Kubernetes privilege probe's judgement (spec D.6.1): the text of
 * /proc/self/status comes from the pod, so a workload that can shape it must not pass for
 * unprivileged. */
#include "nz-kube-probe.h"
#include "../nz-test.h"

#define CLEAN                                                                                      \
  "Name:\tcat\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"                             \
  "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nNoNewPrivs:\t1\n"

static NzKubeProbeVerdict
judge (const char *text)
{
  g_autofree char *what = NULL;
  NzKubeProbeVerdict v = nz_kube_probe_judge (text, &what);

  ck_assert (v == NZ_KUBE_PROBE_OK || what != NULL);
  return v;
}

START_TEST (test_verdicts)
{
  ck_assert_int_eq (judge (CLEAN), NZ_KUBE_PROBE_OK);
  /* big integers: any number of hex digits, zero is zero */
  ck_assert_int_eq (judge ("CapInh:\t0\nCapPrm:\t00\nCapEff:\t000000000000000000000000\n"
                           "CapBnd:\t0\nNoNewPrivs:\t1\n"),
                    NZ_KUBE_PROBE_OK);
  ck_assert_int_eq (judge ("CapInh:\t0\nCapPrm:\t0\nCapEff:\t00000000a80425fb\nCapBnd:\t0\n"
                           "NoNewPrivs:\t1\n"),
                    NZ_KUBE_PROBE_PRIVILEGED);
  ck_assert_int_eq (judge ("CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t000001ffffffffff\n"
                           "NoNewPrivs:\t1\n"),
                    NZ_KUBE_PROBE_PRIVILEGED);
  ck_assert_int_eq (judge ("CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nNoNewPrivs:\t0\n"),
                    NZ_KUBE_PROBE_PRIVILEGED);
  ck_assert_int_eq (judge ("CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\n"),
                    NZ_KUBE_PROBE_UNREADABLE);
  ck_assert_int_eq (judge (""), NZ_KUBE_PROBE_UNREADABLE);
  ck_assert_int_eq (judge ("CapInh:\t0x0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nNoNewPrivs:\t1\n"),
                    NZ_KUBE_PROBE_UNREADABLE);
  ck_assert_int_eq (judge ("CapInh:\t\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\nNoNewPrivs:\t1\n"),
                    NZ_KUBE_PROBE_UNREADABLE);
}
END_TEST

/* A workload that could add lines (a crafted binary named cat) must not shadow the real
 * ones: a repeated field is unreadable, never the zero one picked. */
START_TEST (test_repeated_fields_refused)
{
  ck_assert_int_eq (judge ("CapEff:\t0\n"
                           "CapInh:\t0\nCapPrm:\t0\nCapEff:\t00000000a80425fb\n"
                           "CapBnd:\t0\nNoNewPrivs:\t1\n"),
                    NZ_KUBE_PROBE_UNREADABLE);
  ck_assert_int_eq (judge (CLEAN "NoNewPrivs:\t1\n"), NZ_KUBE_PROBE_UNREADABLE);
  /* a prefix is not the field */
  ck_assert_int_eq (judge ("CapEffX:\t1\n" CLEAN), NZ_KUBE_PROBE_OK);
  ck_assert_str_eq (nz_kube_probe_reason (NZ_KUBE_PROBE_PRIVILEGED), "privileged");
  ck_assert_str_eq (nz_kube_probe_reason (NZ_KUBE_PROBE_UNREADABLE), "unreadable-output");
  ck_assert_str_eq (nz_kube_probe_reason (NZ_KUBE_PROBE_FAILED), "probe-failed");
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("kube-probe");
  TCase *tc = tcase_create ("probe");

  tcase_add_test (tc, test_verdicts);
  tcase_add_test (tc, test_repeated_fields_refused);
  suite_add_tcase (s, tc);
  return nz_test_run (s);
}
