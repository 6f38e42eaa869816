"""The test suite is a package so that its modules can import `tests.helpers`."""
