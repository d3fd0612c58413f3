/* Model loading: the golden models of both variants (public release and
 * research version) load with the right configuration and pointers, and every
 * kind of bad file gives the right status and a message that names the file
 * and the culprit. Bad files are made by editing the JSON header (or poking
 * the data) of the golden diamond and research models.
 * Layout: this driver; the shared helpers in model/harness.[ch]; one model/<topic>.c per topic
 * (golden, research, api, safetensors, bad_files). */
#include "model/harness.h"

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    /* Check runs a tcase's tests in the order added: the topics interleave to
     * keep the order of the one-file version (research between bad_files and
     * fuzz). */
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    golden_tests(tc);
    research_load_tests(tc);
    api_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("safetensors");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    safetensors_tests(tc);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_files");
    tcase_set_timeout(tc, TU_HANG_GUARD_S);
    bad_file_tests(tc);
    research_bad_tests(tc);
    fuzz_tests(tc);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(model_suite());
    int failed;
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
