/* The model API without a model file: NULL arguments, the element table. */
#include "harness.h"

START_TEST(test_api_null)
{
    ecenet_model *m = NULL;
    char err[256];
    ck_assert_int_eq(ecenet_model_load(NULL, &m, err, sizeof err), ECENET_ERR_ARGUMENT);
    ck_assert_int_eq(ecenet_model_load("x", NULL, err, sizeof err), ECENET_ERR_ARGUMENT);
    ck_assert_int_eq(ecenet_model_load("/nonexistent/x", &m, NULL, 0), ECENET_ERR_IO);
    ck_assert_int_eq(ecenet_model_load("/nonexistent/x", &m, err, 1), ECENET_ERR_IO);
    ck_assert_str_eq(err, "");
    ecenet_model_free(NULL);
    ck_assert_int_eq(ecenet_model_n_types(NULL), 0);
    ck_assert_int_eq(ecenet_model_type_of(NULL, 6), -1);
    ck_assert_int_eq(ecenet_model_type_number(NULL, 0), -1);
    ck_assert_ptr_null(ecenet_model_config_json(NULL));
}
END_TEST

START_TEST(test_elements)
{
    int z;
    ck_assert_int_eq(ecenet_element_number("H"), 1);
    ck_assert_int_eq(ecenet_element_number("C"), 6);
    ck_assert_int_eq(ecenet_element_number("Na"), 11);
    ck_assert_int_eq(ecenet_element_number("Cl"), 17);
    ck_assert_int_eq(ecenet_element_number("Fe"), 26);
    ck_assert_int_eq(ecenet_element_number("I"), 53);
    ck_assert_int_eq(ecenet_element_number("W"), 74);
    ck_assert_int_eq(ecenet_element_number("U"), 92);
    ck_assert_int_eq(ecenet_element_number("Lr"), 103);
    ck_assert_int_eq(ecenet_element_number("Og"), 118);
    ck_assert_int_eq(ecenet_element_number("c"), 0);
    ck_assert_int_eq(ecenet_element_number("NA"), 0);
    ck_assert_int_eq(ecenet_element_number("Xx"), 0);
    ck_assert_int_eq(ecenet_element_number(""), 0);
    ck_assert_int_eq(ecenet_element_number(NULL), 0);
    ck_assert_str_eq(ecenet_element_symbol(1), "H");
    ck_assert_str_eq(ecenet_element_symbol(79), "Au");
    ck_assert_str_eq(ecenet_element_symbol(118), "Og");
    ck_assert_ptr_null(ecenet_element_symbol(0));
    ck_assert_ptr_null(ecenet_element_symbol(119));
    ck_assert_ptr_null(ecenet_element_symbol(-3));
    for (z = 1; z <= 118; z++) {
        const char *s = ecenet_element_symbol(z);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(ecenet_element_number(s), z);
    }
}
END_TEST

void api_tests(TCase *tc)
{
    tcase_add_test(tc, test_api_null);
    tcase_add_test(tc, test_elements);
}
