/* SPDX-License-Identifier: MIT */
/* status.c - fc_strerror and fc_status_name, generated from FC_STATUS_LIST
 * so the text, the name and the value can never disagree. */
#include "fucina/status.h"

#include <assert.h>

#define FC__COUNT_ONE(name, value, text) +1
_Static_assert((0 FC_STATUS_LIST(FC__COUNT_ONE)) == FC_STATUS_COUNT,
               "FC_STATUS_COUNT must match FC_STATUS_LIST");
#undef FC__COUNT_ONE

const char *fc_strerror(fc_status status) {
    switch (status) {
#define FC__TEXT(name, value, text)                                                                \
    case name:                                                                                     \
        return text;
        FC_STATUS_LIST(FC__TEXT)
#undef FC__TEXT
    }
    return "unknown status";
}

const char *fc_status_name(fc_status status) {
    switch (status) {
#define FC__NAME(name, value, text)                                                                \
    case name:                                                                                     \
        return #name;
        FC_STATUS_LIST(FC__NAME)
#undef FC__NAME
    }
    return "FC_UNKNOWN";
}
