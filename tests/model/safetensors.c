/* The safetensors reader on files written here: alignment, metadata, scalar
 * tensors, and every kind of bad header. */
#include "harness.h"

START_TEST(test_st_misaligned_and_meta)
{
    /* A U8 tensor first puts the F64 tensor at offset 1: the reader must
     * still hand out an aligned pointer to the right values. */
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"dtype\":\"F64\",\"shape\":[2],"
                       "\"data_offsets\":[1,17]},\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
                       "\"data_offsets\":[0,1]},\"s\":{\"dtype\":\"I32\",\"shape\":[],"
                       "\"data_offsets\":[17,21]}}";
    unsigned char data[21];
    double v[2] = {1.5, -2.25}, got[2];
    int32_t i32 = -7;
    char err[512], *path;
    ecn_safetensors *st;
    const ecn_tensor *t;
    data[0] = 42;
    memcpy(data + 1, v, 16);
    memcpy(data + 17, &i32, 4);
    path = write_st(json, data, sizeof data);
    st = ecn_st_open(path, err, sizeof err);
    ck_assert_msg(st != NULL, "%s", err);
    ck_assert_uint_eq(st->n_tensors, 3);
    ck_assert_str_eq(st->tensors[0].name, "a"); /* sorted */
    ck_assert_str_eq(st->tensors[1].name, "b");
    t = ecn_st_find(st, "b");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->dtype, ECN_DT_F64);
    ck_assert_int_eq(t->rank, 1);
    ck_assert_int_eq(t->shape[0], 2);
    ck_assert_uint_eq((uintptr_t)t->data % 8, 0);
    memcpy(got, t->data, 16);
    ck_assert_double_eq(got[0], 1.5);
    ck_assert_double_eq(got[1], -2.25);
    ck_assert_int_eq(*(const uint8_t *)ecn_st_find(st, "a")->data, 42);
    t = ecn_st_find(st, "s");
    ck_assert_int_eq(t->rank, 0);
    ck_assert_int_eq(t->numel, 1);
    ck_assert_int_eq(*(const int32_t *)t->data, -7);
    ck_assert_ptr_null(ecn_st_find(st, "zz"));
    ck_assert_str_eq(ecn_st_meta(st, "k"), "v");
    ck_assert_ptr_null(ecn_st_meta(st, "nope"));
    ecn_st_close(st);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_st_bad_headers)
{
    static const struct {
        const char *json, *needle;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[8,8]}}", "'a' appears twice"},
        /* the tensors must tile the data section (8 bytes here) */
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
         "'b': data_offsets [4, 8] overlap tensor 'a' [0, 8]"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
         "'a': data_offsets [4, 8] leave bytes [0, 4) of the data section to no tensor"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}",
         "ends at byte 4 of the 8-byte data section: 4 trailing bytes"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"__metadata__\":{\"k\":1}}", "metadata key 'k'"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", "'a': unsupported dtype"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[-1],\"data_offsets\":[0,8]}}", "'a': shape entry 0"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", "'a': shape entry 0"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,8]}}", "'a': rank 9"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[8,0]}}", "'a': data_offsets"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0]}}", "'a': \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1]}}", "'a': \"data_offsets\""},
        {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,8]}}", "'a': missing or non-string \"dtype\""},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1000000000,1000000000,1000000000],"
         "\"data_offsets\":[0,8]}}", "'a': shape is too large"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", "'a': data_offsets [0, 8] hold 8 bytes"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", "'a': data_offsets [0, 16] exceed the data section (8 bytes)"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", "'a': \"data_offsets\""},
        {"{\"a\":[1,2]}", "'a': header entry is not a JSON object"},
        {"{\"a\":\"x\"}", "'a': header entry is not a JSON object"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]},"
         "\"__metadata__\":\"x\"}", "\"__metadata__\" is not a JSON object"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":7,\"data_offsets\":[0,8]}}", "'a': missing or non-array \"shape\""},
        {"[1,2]", "not a JSON object"},
        {"{\"a\":", "not valid JSON"},
    };
    size_t i;
    unsigned char data[8] = {0};
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[512], *path = write_st(cases[i].json, data, sizeof data);
        ecn_safetensors *st = ecn_st_open(path, err, sizeof err);
        ck_assert_msg(st == NULL, "case %zu opened", i);
        ck_assert_msg(strncmp(err, path, strlen(path)) == 0 && contains(err, cases[i].needle),
                      "case %zu: message '%s' lacks '%s'", i, err, cases[i].needle);
        unlink(path);
        free(path);
    }
}
END_TEST

void safetensors_tests(TCase *tc)
{
    tcase_add_test(tc, test_st_misaligned_and_meta);
    tcase_add_test(tc, test_st_bad_headers);
}
