/* Linked only into libzookeeper_st.so.2: when the library is loaded, switch libzkrs to
 * single-threaded handles (no I/O or completion thread; the application drives each handle with
 * zookeeper_interest and zookeeper_process). */
void zkrs_use_single_threaded(void);

__attribute__((constructor)) static void zkrs_st_mode(void) {
    zkrs_use_single_threaded();
}
